// `cotune serve [--store FILE] [--listen ADDRESS:PORT]`: the live view of a store's studies.
#include <cotune/core/errors.hpp>
#include <cotune/core/report/live_server.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_location.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/program_options.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

// "127.0.0.1:8080", "[::1]:8080" or ":8080" (loopback) into address and port.
void parse_listen(const std::string& text, report::LiveServerOptions* o) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw UserError("--listen: expected ADDRESS:PORT, got '" + text + "'");
  std::string host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!host.empty()) o->address = host;
  size_t used = 0;
  long value = -1;
  try {
    value = std::stol(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port.size() || port.empty() || value < 0 || value > 65535)
    throw UserError("--listen: expected a port number 0-65535 after ':', got '" + port + "'");
  o->port = static_cast<std::uint16_t>(value);
}

int run(int argc, char** argv) {
  po::options_description opts("cotune serve [options]");
  std::string listen = "127.0.0.1:8080";
  report::LiveServerOptions o;
  o.store_path = default_store_path();
  opts.add_options()("help,h", "show this help")("store", po::value(&o.store_path),
                                                  kStoreHelp)(
      "listen", po::value(&listen), "ADDRESS:PORT to listen on (default: 127.0.0.1:8080; port 0: any free port)")(
      "refresh", po::value(&o.refresh_s), "seconds between reloads of a running study's page (default: 5)")(
      "max-connections", po::value(&o.max_connections), "connections open at once; more are closed (default: 256)");
  po::variables_map vm;
  try {
    // No positional words: `cotune serve s.db` must not serve ./cotune.db instead.
    po::store(po::command_line_parser(argc, argv).options(opts).positional(po::positional_options_description()).run(),
              vm);
    po::notify(vm);
  } catch (const po::too_many_positional_options_error&) {
    throw UserError("unexpected argument: cotune serve takes options only (the store: --store FILE)");
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts << "\nServes the list of studies at / and each study's report at /studies/NAME, regenerated\n"
                         "from the store on every request; as JSON at /api/studies and /api/studies/NAME?limit=N\n"
                         "(docs/show-json.md). Read-only; loopback unless --listen says otherwise.\n"
                         "Each connection may make 10 requests a second (30 at once; more get 429).\n";
    return 0;
  }
  if (o.max_connections < 1)
    throw UserError("--max-connections: expected a positive number, got " + std::to_string(o.max_connections));
  if (o.refresh_s < 1) throw UserError("--refresh: expected a positive number of seconds, got " + std::to_string(o.refresh_s));
  parse_listen(listen, &o);
  report::LiveServer server(o);
  std::printf("serving %s on http://%s:%u/ (Ctrl-C stops)\n", redact_store_location(o.store_path).c_str(),
              o.address.find(':') != std::string::npos ? ("[" + o.address + "]").c_str() : o.address.c_str(),
              static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  // Ctrl-C and SIGTERM stop the server cleanly.
  boost::asio::io_context signals_ioc;
  boost::asio::signal_set signals(signals_ioc, SIGINT, SIGTERM);
  signals.async_wait([&server](const boost::system::error_code& ec, int) {
    if (!ec) server.stop();
  });
  std::thread signal_thread([&signals_ioc] { signals_ioc.run(); });
  server.run();
  signals.cancel();
  signals_ioc.stop();
  signal_thread.join();
  return 0;
}

COTUNE_COMMAND("serve", "serve the live view of a store's studies (HTML)", run);
}  // namespace
}  // namespace cotune::cli
