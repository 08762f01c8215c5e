// Whether a study's lease (or a worker's registration) still stands: the holder's heartbeat is
// recent and, on this host, its process is alive. Used by `cotune run` to take or join a study and
// by `cotune store delete` to refuse a study that is being run.
#ifndef COTUNE_CORE_RUN_LEASE_HPP_
#define COTUNE_CORE_RUN_LEASE_HPP_

#include <cotune/core/store/store_records.hpp>

#include <string>

namespace cotune::core {

// A lease whose heartbeat is this much older than now is stale, whichever host holds it (a run
// renews it every 5 s; a refit or a plugin call can hold the loop for a while).
inline constexpr double kLeaseStaleAfterS = 120;

// This machine's host name, as leases record it.
std::string lease_host_name();

// A lease for this process (host and pid; the store sets the heartbeat).
StudyLease this_process_lease();

// True while `holder` still holds: heartbeat within kLeaseStaleAfterS and, on this host, a live
// process (not gone, not a zombie left unreaped).
bool lease_is_live(const StudyLease& holder);

// The cautious reading, for what cannot be undone (deleting the study): a holder on this host
// whose process is alive holds whatever its heartbeat says (a long refit or plugin call delays
// the heartbeat); one elsewhere holds while its heartbeat is recent.
bool lease_may_hold(const StudyLease& holder);

}  // namespace cotune::core

#endif  // COTUNE_CORE_RUN_LEASE_HPP_
