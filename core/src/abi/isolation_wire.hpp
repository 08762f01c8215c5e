// The wire between the host and a plugin it runs in a child process ("isolation": "process"):
// length-prefixed frames on a stream socket, each a message of fixed-width fields read in the order
// they were written. Both ends are the same build of cotune, so structs travel as their bytes, with
// every pointer in them replaced on arrival. What the child sends is bounded (kMaxFrameBytes) and
// read with bounds checks: a plugin that dies or writes garbage gives an error, never a crash.
#ifndef COTUNE_ABI_ISOLATION_WIRE_HPP_
#define COTUNE_ABI_ISOLATION_WIRE_HPP_

#include <cotune/cotune.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core::isolation {

// Requests of the host, callbacks of the child (a searcher's context during propose) and replies.
enum class Op : uint32_t {
  kCreate = 1,
  kSpaceDescribe, kSpaceCheck, kSpaceExplain, kSpaceSample, kSpaceDescribeFeatures, kSpaceFeaturize,
  kSpaceLower, kSpaceRender, kSpaceParse, kSpaceSetTarget, kSpaceMetrics,
  kPredictorFit, kPredictorPredict, kPredictorSave, kPredictorLoad, kPredictorDescribeFit,
  kSearcherPropose, kSearcherObserve, kSearcherSave, kSearcherLoad,
  kExecutorCapacity, kExecutorSubmit, kExecutorPoll, kExecutorCancel, kExecutorRelease, kExecutorAttach,
  kExecutorCandidates, kExecutorMetrics, kExecutorCheckStudy,
  kDestroy = 50,  // the host is done with the instance (a closed socket without it: the host died)
  kContextSample = 60, kContextCheck, kContextScore, kContextSeen,
  kOk = 100,  // a reply: the call's outputs follow
  kFailed,    // a reply: i32 error code, then the message
};

// The most one frame may carry (a saved predictor state, a table of candidates).
inline constexpr size_t kMaxFrameBytes = size_t{1} << 30;

// A malformed or truncated message.
struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  explicit Writer(Op op) { u32(static_cast<uint32_t>(op)); }
  Writer& u32(uint32_t v) { return pod(v); }
  Writer& i32(int32_t v) { return pod(v); }
  Writer& u64(uint64_t v) { return pod(v); }
  Writer& f64(double v) { return pod(v); }
  Writer& bytes(std::string_view s);
  Writer& f64s(const double* p, size_t n);
  Writer& i32s(const int32_t* p, size_t n);
  Writer& params(const cotune_param* const* params, size_t n);
  Writer& trace(const cotune_trace* trace);  // may be null
  Writer& trial(const cotune_trial& trial);
  const std::string& data() const { return buf_; }

 private:
  template <class T>
  Writer& pod(T v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  std::string buf_;
};

// Parameters read off the wire, owning what the cotune_param entries point into.
struct ParamSet {
  struct Entry {
    std::string name, unit, help;
    std::vector<double> values;
    std::vector<std::string> choice_text;
    std::vector<cotune_str> choices;
    cotune_param param{};
  };
  std::vector<Entry> entries;
  std::vector<const cotune_param*> pointers;
};

// A step trace read off the wire, owning its ops and strings.
struct TraceCopy {
  cotune_trace trace{};
  std::vector<cotune_op> ops;
  std::vector<std::string> labels;
  std::string gpu_name;
};

// A trial read off the wire, owning everything `trial` points into.
struct TrialCopy {
  std::string id, config_json, launch_args, workload_json, workdir;
  TraceCopy trace;
  ParamSet params;
  std::vector<double> config;
  cotune_trial trial{};
};

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  Op op() { return static_cast<Op>(u32()); }
  uint32_t u32() { return pod<uint32_t>(); }
  int32_t i32() { return pod<int32_t>(); }
  uint64_t u64() { return pod<uint64_t>(); }
  double f64() { return pod<double>(); }
  std::string_view bytes();
  std::vector<double> f64s();
  std::vector<int32_t> i32s();
  // Reads into caller memory of exactly `n` values (a call's output buffer).
  void f64s_into(double* out, size_t n);
  void i32s_into(int32_t* out, size_t n);
  void params(ParamSet* out);
  bool trace(TraceCopy* out);  // false when the writer sent none
  void trial(TrialCopy* out);
  void expect_end() const;

 private:
  std::string_view take(size_t n);
  template <class T>
  T pod() {
    T v;
    const std::string_view s = take(sizeof v);
    std::memcpy(&v, s.data(), sizeof v);
    return v;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

// Writes one frame. False (with `why`) when the other end is gone.
bool send_frame(int fd, std::string_view payload, std::string* why);
// Reads one frame. False (with `why`) at end of stream, on error, or for a frame over the limit.
bool recv_frame(int fd, std::string* payload, std::string* why);

}  // namespace cotune::core::isolation

#endif  // COTUNE_ABI_ISOLATION_WIRE_HPP_
