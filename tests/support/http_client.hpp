// A minimal HTTP/1.1 client for tests of the live server (cotune serve): one request on its own
// connection to 127.0.0.1, one reply read whole.
#ifndef COTUNE_TESTS_SUPPORT_HTTP_CLIENT_HPP_
#define COTUNE_TESTS_SUPPORT_HTTP_CLIENT_HPP_

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <string>

namespace cotune::testing {

struct Reply {
  int status = 0;
  std::string body;
  boost::beast::http::response<boost::beast::http::string_body> message;
};

// Sends `raw` bytes as they are (so that odd targets reach the server untouched) and reads one reply.
inline Reply exchange(std::uint16_t port, const std::string& raw, bool head = false) {
  namespace http = boost::beast::http;
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  boost::asio::write(socket, boost::asio::buffer(raw));
  boost::beast::flat_buffer buffer;
  Reply r;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  parser.skip(head);  // a reply to HEAD has headers only
  http::read(socket, buffer, parser);
  r.message = parser.release();
  r.status = static_cast<int>(r.message.result_int());
  r.body = r.message.body();
  return r;
}

inline Reply get(std::uint16_t port, const std::string& target, const std::string& method = "GET") {
  return exchange(port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                  method == "HEAD");
}

}  // namespace cotune::testing

#endif  // COTUNE_TESTS_SUPPORT_HTTP_CLIENT_HPP_
