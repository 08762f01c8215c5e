// The live view's HTTP server for real on 127.0.0.1 (ephemeral port) over a real store: its pages,
// 404 for unknown paths, refusal of path traversal and of writes, its size, rate and connection
// limits, rendering beside the accept loop, and `cotune serve` out of file descriptors.
#include <cotune/core/errors.hpp>
#include <cotune/core/report/live_server.hpp>
#include <cotune/core/store/store.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <filesystem>
#include <future>
#include <thread>

#include "run/lease.hpp"
#include "support/cli_process.hpp"
#include "support/http_client.hpp"
#include "unit/report_study_fixture.hpp"

namespace cotune::core::report {
namespace {
namespace fs = std::filesystem;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

using testing::exchange;
using testing::get;
using testing::Reply;

class Serve : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-serve-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_path_ = dir_ + "/cotune.db";
    Store store(store_path_);
    testing::fill_report_study(store, dir_, "my study", 6);
  }
  void TearDown() override {
    stop();
    fs::remove_all(dir_);
  }
  void start(LiveServerOptions o) {
    o.store_path = store_path_;
    o.port = 0;
    server_ = std::make_unique<LiveServer>(o);
    thread_ = std::thread([this] { server_->run(); });
  }
  void stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  std::uint16_t port() const { return server_->port(); }

  std::string dir_, store_path_;
  std::unique_ptr<LiveServer> server_;
  std::thread thread_;
};

TEST_F(Serve, ListsStudiesAndServesEachReport) {
  start({});
  ASSERT_NE(port(), 0);
  Reply index = get(port(), "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("<a href=\"/studies/my%20study\">my study</a>"), std::string::npos) << index.body;
  EXPECT_EQ(index.message[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_NE(index.message["Content-Security-Policy"].find("default-src 'none'"), std::string::npos);

  // The study is stored as running, but no run holds it (as after a run killed with SIGKILL): the
  // page says so and does not reload itself.
  Reply study = get(port(), "/studies/my%20study");
  EXPECT_EQ(study.status, 200);
  EXPECT_NE(study.body.find("<section id=\"trials\">"), std::string::npos);
  EXPECT_NE(study.body.find("<svg"), std::string::npos);
  EXPECT_NE(study.body.find("my study (interrupted)"), std::string::npos);
  EXPECT_EQ(study.body.find("http-equiv=\"refresh\""), std::string::npos);
  // A live run holds it (this process's lease): it is running, and the page reloads itself.
  {
    Store store(store_path_);
    const std::int64_t id = store.find_study("my study")->id;
    ASSERT_FALSE(store.take_study_lease(id, this_process_lease(), [](const StudyLease&) { return true; }));
  }
  study = get(port(), "/studies/my%20study");
  EXPECT_NE(study.body.find("my study (running)"), std::string::npos);
  EXPECT_NE(study.body.find("http-equiv=\"refresh\""), std::string::npos);

  Reply head = get(port(), "/", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_GT(std::stoul(std::string(head.message[http::field::content_length])), 0u);
}

// Two studies of one workload: the index links a page comparing them, with a best-so-far curve each.
TEST_F(Serve, ComparesTheStudiesOfOneWorkload) {
  {
    Store store(store_path_);
    testing::fill_report_study(store, dir_, "second", 4);
  }
  start({});
  Reply index = get(port(), "/");
  const size_t at = index.body.find("href=\"/compare/");
  ASSERT_NE(at, std::string::npos) << index.body;
  const size_t from = at + std::string("href=\"").size();
  const std::string link = index.body.substr(from, index.body.find('"', from) - from);
  Reply page = get(port(), link);
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<a href=\"/studies/my%20study\">my study</a>"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("<a href=\"/studies/second\">second</a>"), std::string::npos);
  EXPECT_NE(page.body.find("trials to within 1 % of the best of all"), std::string::npos);
  const std::string chart = page.body.substr(page.body.find("<section id=\"convergence\">"));
  size_t lines = 0;
  for (size_t p = chart.find("<polyline"); p != std::string::npos; p = chart.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_EQ(get(port(), "/compare/0123abcd").status, 404) << "no study of that workload";
  EXPECT_EQ(get(port(), "/compare/..%2Fx").status, 404);
}

TEST_F(Serve, FinishedStudyDoesNotReload) {
  {
    Store store(store_path_);
    store.set_study_status(store.find_study("my study")->id, StudyStatus::kFinished);
  }
  start({});
  Reply study = get(port(), "/studies/my%20study?x=1");
  EXPECT_EQ(study.status, 200);
  EXPECT_EQ(study.body.find("http-equiv=\"refresh\""), std::string::npos);
}

TEST_F(Serve, UnknownPathsAre404) {
  start({});
  for (const char* target : {"/nope", "/studies/", "/studies/other", "/cotune.db", "/studies/my%20study/x",
                             "/favicon.ico"}) {
    Reply r = get(port(), target);
    EXPECT_EQ(r.status, 404) << target;
  }
  EXPECT_NE(get(port(), "/studies/other").body.find("No study named &#39;other&#39;"), std::string::npos);
}

TEST_F(Serve, PathTraversalIsRefused) {
  start({});
  const std::string store_name = fs::path(store_path_).filename().string();
  for (const std::string& target : std::vector<std::string>{"/../../../../etc/passwd", "/studies/..%2F..%2F..%2Fetc%2Fpasswd", "/studies/%2e%2e",
                             "/studies/..", "/studies/../" + store_name, "/%2e%2e/%2e%2e/etc/passwd",
                             "/studies/%00", "/studies/%zz"}) {
    Reply r = get(port(), target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("root:"), std::string::npos) << target;
    EXPECT_EQ(r.body.find("SQLite format"), std::string::npos) << target;
  }
  EXPECT_EQ(get(port(), "etc/passwd").status, 400);  // not an origin-form target
}

TEST_F(Serve, ReadOnly) {
  start({});
  Reply post = exchange(port(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.message[http::field::allow], "GET, HEAD");
  EXPECT_EQ(get(port(), "/", "DELETE").status, 405);
}

TEST_F(Serve, RequestSizeIsLimited) {
  LiveServerOptions o;
  o.max_header_bytes = 1024;
  o.max_body_bytes = 16;
  start(o);
  Reply big_header =
      exchange(port(), "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'a') + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(big_header.status, 431);
  Reply big_body = exchange(port(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'b'));
  EXPECT_EQ(big_body.status, 413);
  EXPECT_EQ(get(port(), "/").status, 200);  // the server carries on
}

// Requests over one kept-alive connection, each reply read before the next request goes.
std::vector<int> statuses_on_one_connection(std::uint16_t port, int requests) {
  boost::asio::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  boost::beast::flat_buffer buffer;
  std::vector<int> out;
  for (int i = 0; i < requests; ++i) {
    boost::asio::write(socket, boost::asio::buffer(std::string("GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")));
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    out.push_back(static_cast<int>(res.result_int()));
  }
  return out;
}

TEST_F(Serve, RequestRateIsLimitedPerConnection) {
  LiveServerOptions o;
  o.requests_per_second = 0.01;
  o.burst = 3;
  start(o);
  EXPECT_EQ(statuses_on_one_connection(port(), 4), (std::vector<int>{404, 404, 404, 429}));
  // Another client on the same address is not held back by the first one's rate.
  Reply other = get(port(), "/nope");
  EXPECT_EQ(other.status, 404);
  boost::asio::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port()));
  boost::asio::write(socket, boost::asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
  for (int i = 0; i < 3; ++i)
    boost::asio::write(socket, boost::asio::buffer(std::string("GET /x HTTP/1.1\r\nHost: x\r\n\r\n")));
  boost::beast::flat_buffer buffer;
  int limited = 0;
  for (int i = 0; i < 4; ++i) {
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    limited += res.result_int() == 429;
    if (res.result_int() == 429) {
      EXPECT_EQ(res[http::field::retry_after], "1");
    }
  }
  EXPECT_EQ(limited, 1);
}

TEST_F(Serve, ConnectionsBeyondTheCapAreClosed) {
  LiveServerOptions o;
  o.max_connections = 2;
  start(o);
  boost::asio::io_context ioc;
  std::vector<tcp::socket> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back(ioc);
    held.back().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port()));
  }
  // Both are served (the server has accepted them) before the third arrives.
  for (auto& s : held) {
    boost::asio::write(s, boost::asio::buffer(std::string("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")));
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(s, buffer, res);
    EXPECT_EQ(res.result_int(), 404u);
  }
  EXPECT_ANY_THROW(get(port(), "/")) << "a third connection is closed unanswered";
  held.clear();
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    try {
      status = get(port(), "/").status;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  EXPECT_EQ(status, 200) << "served again once the others closed";
}

// A report being generated does not hold up other clients: the page of the study is held on its
// rendering thread until another request has been answered.
TEST_F(Serve, AReportBeingRenderedDoesNotHoldUpOtherClients) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  LiveServerOptions o;
  o.on_render = [released](const std::string& target) {
    if (target.rfind("/studies/", 0) == 0) released.wait();
  };
  start(o);
  auto slow = std::async(std::launch::async, [this] { return get(port(), "/studies/my%20study").status; });
  auto quick = std::async(std::launch::async, [this] { return get(port(), "/nope").status; });
  ASSERT_EQ(quick.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "held up by the slow page";
  EXPECT_EQ(quick.get(), 404);
  EXPECT_NE(slow.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  release.set_value();
  EXPECT_EQ(slow.get(), 200);
}

// `cotune serve` out of file descriptors: it waits before accepting again and logs about once a
// second instead of spinning with a line per try; it serves again once descriptors free up.
TEST_F(Serve, OutOfFileDescriptorsSlowsAcceptInsteadOfSpinning) {
#ifdef __SANITIZE_ADDRESS__
  // UBSan's vptr check probes memory through a pipe: with no descriptor left it cannot, and reports
  // every virtual call as one on a bad object. Out of descriptors is tested in the other builds.
  GTEST_SKIP() << "descriptor exhaustion breaks the sanitizer runtime's own checks";
#endif
  const std::string out = dir_ + "/serve.out", err = dir_ + "/serve.err";
  const pid_t pid = testing::spawn_cotune(dir_, {"serve", "--store", store_path_, "--listen", "127.0.0.1:0"}, out, err, [] {
    rlimit limit{40, 40};
    return ::setrlimit(RLIMIT_NOFILE, &limit);
  });
  std::uint16_t serve_port = 0;
  for (int i = 0; i < 200 && serve_port == 0; ++i) {
    const std::string text = testing::read_file(out);
    const size_t at = text.find("http://127.0.0.1:");
    if (at != std::string::npos && text.find('/', at + 17) != std::string::npos)
      serve_port = static_cast<std::uint16_t>(std::stoi(text.substr(at + 17)));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(serve_port, 0) << testing::read_file(err);
  boost::asio::io_context ioc;
  std::vector<tcp::socket> crowd;
  for (int i = 0; i < 80; ++i) {
    crowd.emplace_back(ioc);
    crowd.back().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), serve_port));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::string log = testing::read_file(err);
  size_t failures = 0;
  for (size_t at = log.find("accept failed"); at != std::string::npos; at = log.find("accept failed", at + 1)) ++failures;
  EXPECT_GE(failures, 1u) << log;
  EXPECT_LE(failures, 5u) << "at most a line a second:\n" << log;
  crowd.clear();
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    try {
      status = get(serve_port, "/").status;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_EQ(status, 200) << testing::read_file(err);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit_within(pid, std::chrono::seconds(20)), 0) << testing::read_file(err);
}

// `cotune serve s.db` must not serve ./cotune.db (or $COTUNE_STORE) instead of the file named.
// /api/studies and /api/studies/NAME: the documents of `cotune show --json` (docs/show-json.md).
TEST_F(Serve, ServesTheStudiesAsJsonUnderApi) {
  start({});
  Reply list = get(port(), "/api/studies");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.message[http::field::content_type], "application/json");
  const nlohmann::json studies = nlohmann::json::parse(list.body);
  EXPECT_EQ(studies["schema_version"], 1);
  ASSERT_EQ(studies["studies"].size(), 1u);
  EXPECT_EQ(studies["studies"][0]["name"], "my study");

  Reply one = get(port(), "/api/studies/my%20study?limit=2");
  ASSERT_EQ(one.status, 200) << one.body;
  const nlohmann::json study = nlohmann::json::parse(one.body);
  EXPECT_EQ(study["study"]["name"], "my study");
  EXPECT_EQ(study["trials"].size(), 2u);
  EXPECT_GT(study["trials_total"].get<int>(), 2);

  Reply missing = get(port(), "/api/studies/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(nlohmann::json::parse(missing.body)["error"], "no such study");
  EXPECT_EQ(get(port(), "/api/studies/my%20study?limit=x").status, 400);
}

TEST_F(Serve, AStoreGivenAsAPlainArgumentIsRefused) {
  const std::string out = dir_ + "/serve.out", err = dir_ + "/serve.err";
  const pid_t pid = testing::spawn_cotune(dir_, {"serve", store_path_, "--listen", "127.0.0.1:0"}, out, err);
  EXPECT_EQ(testing::wait_exit_within(pid, std::chrono::seconds(20)), 2);
  EXPECT_NE(testing::read_file(err).find("unexpected argument"), std::string::npos) << testing::read_file(err);
}

TEST_F(Serve, BadListenAddressAndMissingStoreAreUserErrors) {
  LiveServerOptions o;
  o.store_path = store_path_;
  o.address = "not-an-address";
  EXPECT_THROW(LiveServer{o}, UserError);
  o.address = "127.0.0.1";
  o.store_path = dir_ + "/missing.db";
  EXPECT_ANY_THROW(LiveServer{o});
  EXPECT_FALSE(fs::exists(o.store_path));
}

}  // namespace
}  // namespace cotune::core::report
