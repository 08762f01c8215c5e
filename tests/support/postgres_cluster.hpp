// A throwaway PostgreSQL cluster for a test binary: started on first use (initdb into a temporary
// directory, its Unix socket there, TCP on 127.0.0.1 at a free port, password login), stopped and
// removed when the binary ends (a gtest Environment). Each test asks for a fresh database.
//
// The server binaries are looked for under /usr/lib/postgresql/*/bin (Debian's postgresql package).
// Without them, postgres_cluster() is null and tests skip with the reason. PostgreSQL refuses to run
// as root: as root, initdb and the server run as the `postgres` system user.
//
// initdb takes a second, and ctest runs each test in its own process; so the first process
// initialises a template data directory (once per machine and PostgreSQL version, under a lock)
// that every cluster after it copies.
#ifndef COTUNE_TESTS_SUPPORT_POSTGRES_CLUSTER_HPP_
#define COTUNE_TESTS_SUPPORT_POSTGRES_CLUSTER_HPP_

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "store/postgres.hpp"

namespace cotune::testing {

class PostgresCluster {
 public:
  static constexpr const char* kPassword = "cotune-test-secret";

  // The server's bin directory (highest version), or empty.
  static std::string find_bin_dir() {
    namespace fs = std::filesystem;
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
      const fs::path bin = e.path() / "bin";
      if (fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) found.push_back(bin.string());
    }
    if (found.empty()) return {};
    std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;  // 9.6 < 15 < 16
    });
    return found.back();
  }

  explicit PostgresCluster(std::string bin) : bin_(std::move(bin)) {
    namespace fs = std::filesystem;
    std::string tmpl = "/tmp/cotune-pg-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) throw std::runtime_error("running as root, and no 'postgres' user to run PostgreSQL as");
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      if (::chown(dir_.c_str(), uid_, gid_) != 0) throw std::runtime_error("chown " + dir_ + " failed");
    }
    copy_template(dir_ + "/data");
    // A port found free may be taken by another test process before the server binds it: try again.
    for (int attempt = 1;; ++attempt) {
      port_ = free_port();
      try {
        run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/server.log", "-w", "-t", "60", "-o",
             "-F -k " + dir_ + " -p " + std::to_string(port_) +
                 " -c listen_addresses=127.0.0.1 -c max_connections=60 -c shared_buffers=16MB",
             "start"},
            "pg_ctl start");
        break;
      } catch (const std::exception&) {
        if (attempt == 3) throw;
      }
    }
    started_ = true;
  }

  ~PostgresCluster() {
    if (started_) {
      try {
        run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"}, "pg_ctl stop");
      } catch (const std::exception&) {  // removed below anyway
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PostgresCluster(const PostgresCluster&) = delete;
  PostgresCluster& operator=(const PostgresCluster&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // The URL of database `name` over TCP with the password in it.
  std::string url(const std::string& name) const {
    return "postgresql://postgres:" + std::string(kPassword) + "@127.0.0.1:" + std::to_string(port_) + "/" + name;
  }

  // Runs SQL as the superuser on database `db` (through the Unix socket).
  void admin(const std::string& sql, const std::string& db = "postgres") const {
    core::postgres::Connection c("postgresql:///" + db + "?host=" + dir_ + "&port=" + std::to_string(port_) +
                                     "&user=postgres",
                                 10.0);
    c.exec(sql.c_str());
  }

  // A new, empty database; returns its URL.
  std::string new_database() {
    const std::string name = "t" + std::to_string(++databases_);
    admin("CREATE DATABASE " + name);
    return url(name);
  }

 private:
  // Runs argv (as the postgres user when root), output to the cluster's command log.
  void run(const std::vector<std::string>& argv, const std::string& what) const {
    const std::string log = dir_ + "/commands.log";
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      if (uid_ != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0)) ::_exit(126);
      std::vector<char*> args;
      std::vector<std::string> copy = argv;
      for (std::string& a : copy) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ifstream server(dir_ + "/server.log");
      std::string server_text((std::istreambuf_iterator<char>(server)), std::istreambuf_iterator<char>());
      throw std::runtime_error(what + " failed:\n" + text + server_text);
    }
  }

  // The data directory, copied from a template initialised once (under a lock) per version and user.
  void copy_template(const std::string& data) const {
    namespace fs = std::filesystem;
    const std::string version = fs::path(bin_).parent_path().filename().string();
    const std::string base = "/tmp/cotune-pg-template-" + version + "-" + std::to_string(::geteuid());
    int lock = ::open((base + ".lock").c_str(), O_RDWR | O_CREAT, 0600);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + base + ".lock");
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }
    } unlock{lock};
    if (!fs::exists(base + "/data/PG_VERSION")) {
      const std::string fresh = base + ".new";
      std::error_code ec;
      fs::remove_all(fresh, ec);
      fs::create_directories(fresh);
      if (uid_ != 0 && ::chown(fresh.c_str(), uid_, gid_) != 0) throw std::runtime_error("chown " + fresh + " failed");
      const std::string pwfile = fresh + "/password";
      std::ofstream(pwfile) << kPassword << "\n";
      if (uid_ != 0 && ::chown(pwfile.c_str(), uid_, gid_) != 0) throw std::runtime_error("chown failed");
      run({bin_ + "/initdb", "-D", fresh + "/data", "-U", "postgres", "--auth-local=trust",
           "--auth-host=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--locale=C", "--no-sync"},
          "initdb");
      fs::remove(pwfile);
      fs::remove_all(base, ec);
      fs::rename(fresh, base);
    }
    run({"/bin/cp", "-a", base + "/data", data}, "copying the template cluster");
  }

  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(fd);
      throw std::runtime_error("cannot find a free port");
    }
    ::close(fd);
    return ntohs(addr.sin_port);
  }

  std::string bin_;
  std::string dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  int port_ = 0;
  bool started_ = false;
  int databases_ = 0;
};

// The binary's cluster: started on the first call, stopped at exit by the Environment below.
class PostgresEnvironment : public ::testing::Environment {
 public:
  static PostgresEnvironment& instance() {
    static PostgresEnvironment* env =
        static_cast<PostgresEnvironment*>(::testing::AddGlobalTestEnvironment(new PostgresEnvironment));
    return *env;
  }
  // The cluster, or null with skip_reason() saying why there is none.
  PostgresCluster* cluster() {
    if (!cluster_ && reason_.empty()) {
      const std::string bin = PostgresCluster::find_bin_dir();
      if (bin.empty()) {
        reason_ = "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                  "(scripts/install-deps --test installs them)";
      } else {
        cluster_ = std::make_unique<PostgresCluster>(bin);  // a failure to start fails the test
      }
    }
    return cluster_.get();
  }
  const std::string& skip_reason() const { return reason_; }
  void TearDown() override { cluster_.reset(); }

 private:
  std::unique_ptr<PostgresCluster> cluster_;
  std::string reason_;
};

// Registers the Environment before the tests run, so that its TearDown stops the cluster.
inline const bool kPostgresEnvironmentRegistered = (PostgresEnvironment::instance(), true);

}  // namespace cotune::testing

// In a test or SetUp: a fresh database's URL in `url`, or a skip when there is no server to run.
#define COTUNE_POSTGRES_DATABASE(url)                                                              \
  ::cotune::testing::PostgresCluster* cotune_cluster_ = ::cotune::testing::PostgresEnvironment::instance().cluster(); \
  if (cotune_cluster_ == nullptr) GTEST_SKIP() << ::cotune::testing::PostgresEnvironment::instance().skip_reason(); \
  url = cotune_cluster_->new_database()

#endif  // COTUNE_TESTS_SUPPORT_POSTGRES_CLUSTER_HPP_
