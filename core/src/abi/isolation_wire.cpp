#include "abi/isolation_wire.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace cotune::core::isolation {
namespace {

std::string_view sv(cotune_str s) { return s.data ? std::string_view(s.data, s.len) : std::string_view(); }
cotune_str cs(const std::string& s) { return cotune_str{s.data(), s.size()}; }

}  // namespace

Writer& Writer::bytes(std::string_view s) {
  u64(s.size());
  buf_.append(s.data(), s.size());
  return *this;
}

Writer& Writer::f64s(const double* p, size_t n) {
  u64(n);
  if (n > 0) buf_.append(reinterpret_cast<const char*>(p), n * sizeof(double));
  return *this;
}

Writer& Writer::i32s(const int32_t* p, size_t n) {
  u64(n);
  if (n > 0) buf_.append(reinterpret_cast<const char*>(p), n * sizeof(int32_t));
  return *this;
}

Writer& Writer::params(const cotune_param* const* params, size_t n) {
  u64(n);
  for (size_t i = 0; i < n; ++i) {
    const cotune_param& p = *params[i];
    bytes(sv(p.name)).i32(p.type).u32(p.flags).f64(p.low).f64(p.high);
    f64s(p.values, p.values ? p.num_values : 0);
    u64(p.choices ? p.num_choices : 0);
    for (size_t c = 0; p.choices && c < p.num_choices; ++c) bytes(sv(p.choices[c]));
    f64(p.default_value).bytes(sv(p.unit)).bytes(sv(p.help));
  }
  return *this;
}

Writer& Writer::trace(const cotune_trace* t) {
  u32(t != nullptr);
  if (t == nullptr) return *this;
  cotune_trace head{};
  std::memcpy(&head, t, std::min(t->struct_size, sizeof head));
  const char* op_bytes = reinterpret_cast<const char*>(head.ops);
  const size_t count = head.ops ? head.num_ops : 0, stride = head.op_stride ? head.op_stride : sizeof(cotune_op);
  const std::string gpu(sv(head.hardware.gpu_name));
  head.ops = nullptr;
  head.hardware.gpu_name = cotune_str{nullptr, 0};
  buf_.append(reinterpret_cast<const char*>(&head), sizeof head);
  bytes(gpu);
  u64(count);
  for (size_t i = 0; i < count; ++i) {
    cotune_op op{};
    const auto* src = reinterpret_cast<const cotune_op*>(op_bytes + i * stride);
    std::memcpy(&op, src, std::min({stride, src->struct_size, sizeof op}));
    const std::string label(sv(op.label));
    op.label = cotune_str{nullptr, 0};
    buf_.append(reinterpret_cast<const char*>(&op), sizeof op);
    bytes(label);
  }
  return *this;
}

Writer& Writer::trial(const cotune_trial& t) {
  bytes(sv(t.trial_id)).bytes(sv(t.config_json)).bytes(sv(t.launch_args)).bytes(sv(t.workload_json));
  bytes(sv(t.workdir)).trace(t.trace);
  params(t.params, t.params ? t.num_params : 0);
  u64(t.num_params);
  return f64s(t.config, t.config ? t.num_params : 0);
}

std::string_view Reader::take(size_t n) {
  if (n > data_.size() - pos_) throw WireError("a message from the plugin's process ended early");
  const std::string_view s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::string_view Reader::bytes() { return take(u64()); }

std::vector<double> Reader::f64s() {
  const uint64_t n = u64();
  if (n > (data_.size() - pos_) / sizeof(double)) throw WireError("a message from the plugin's process ended early");
  std::vector<double> v(n);
  if (n > 0) std::memcpy(v.data(), take(n * sizeof(double)).data(), n * sizeof(double));
  return v;
}

std::vector<int32_t> Reader::i32s() {
  const uint64_t n = u64();
  if (n > (data_.size() - pos_) / sizeof(int32_t)) throw WireError("a message from the plugin's process ended early");
  std::vector<int32_t> v(n);
  if (n > 0) std::memcpy(v.data(), take(n * sizeof(int32_t)).data(), n * sizeof(int32_t));
  return v;
}

void Reader::f64s_into(double* out, size_t n) {
  if (u64() != n) throw WireError("the plugin's process sent a value count other than the one asked for");
  if (n > 0) std::memcpy(out, take(n * sizeof(double)).data(), n * sizeof(double));
}

void Reader::i32s_into(int32_t* out, size_t n) {
  if (u64() != n) throw WireError("the plugin's process sent a value count other than the one asked for");
  if (n > 0) std::memcpy(out, take(n * sizeof(int32_t)).data(), n * sizeof(int32_t));
}

void Reader::params(ParamSet* out) {
  const uint64_t n = u64();
  if (n > data_.size() - pos_) throw WireError("a message from the plugin's process ended early");
  out->entries.clear();
  out->entries.resize(n);  // not resized again: the pointers below stay valid
  for (ParamSet::Entry& e : out->entries) {
    e.name = std::string(bytes());
    e.param.type = i32();
    e.param.flags = u32();
    e.param.low = f64();
    e.param.high = f64();
    e.values = f64s();
    const uint64_t choices = u64();
    if (choices > data_.size() - pos_) throw WireError("a message from the plugin's process ended early");
    for (uint64_t c = 0; c < choices; ++c) e.choice_text.emplace_back(bytes());
    e.param.default_value = f64();
    e.unit = std::string(bytes());
    e.help = std::string(bytes());
    for (const std::string& c : e.choice_text) e.choices.push_back(cs(c));
    e.param.struct_size = sizeof(cotune_param);
    e.param.name = cs(e.name);
    e.param.values = e.values.empty() ? nullptr : e.values.data();
    e.param.num_values = e.values.size();
    e.param.choices = e.choices.empty() ? nullptr : e.choices.data();
    e.param.num_choices = e.choices.size();
    e.param.unit = cs(e.unit);
    e.param.help = cs(e.help);
  }
  out->pointers.clear();
  for (const ParamSet::Entry& e : out->entries) out->pointers.push_back(&e.param);
}

bool Reader::trace(TraceCopy* out) {
  if (u32() == 0) return false;
  std::memcpy(&out->trace, take(sizeof out->trace).data(), sizeof out->trace);
  out->gpu_name = std::string(bytes());
  const uint64_t n = u64();
  if (n > (data_.size() - pos_) / sizeof(cotune_op)) throw WireError("a message from the plugin's process ended early");
  out->ops.resize(n);
  out->labels.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(&out->ops[i], take(sizeof(cotune_op)).data(), sizeof(cotune_op));
    out->labels[i] = std::string(bytes());
  }
  for (uint64_t i = 0; i < n; ++i) out->ops[i].label = cs(out->labels[i]);
  out->trace.struct_size = sizeof out->trace;
  out->trace.ops = out->ops.empty() ? nullptr : out->ops.data();
  out->trace.num_ops = out->ops.size();
  out->trace.op_stride = sizeof(cotune_op);
  out->trace.hardware.gpu_name = cs(out->gpu_name);
  return true;
}

void Reader::trial(TrialCopy* out) {
  out->id = std::string(bytes());
  out->config_json = std::string(bytes());
  out->launch_args = std::string(bytes());
  out->workload_json = std::string(bytes());
  out->workdir = std::string(bytes());
  const bool has_trace = trace(&out->trace);
  params(&out->params);
  const uint64_t num_params = u64();
  out->config = f64s();
  if (!out->config.empty() && out->config.size() != num_params)
    throw WireError("a trial from the host has " + std::to_string(out->config.size()) + " values for " +
                    std::to_string(num_params) + " parameters");
  cotune_trial& t = out->trial;
  t = cotune_trial{};
  t.struct_size = sizeof t;
  t.trial_id = cs(out->id);
  t.config_json = cs(out->config_json);
  t.launch_args = cs(out->launch_args);
  t.workload_json = cs(out->workload_json);
  t.workdir = cs(out->workdir);
  t.trace = has_trace ? &out->trace.trace : nullptr;
  t.params = out->params.pointers.empty() ? nullptr : out->params.pointers.data();
  t.num_params = num_params;
  t.config = out->config.empty() ? nullptr : out->config.data();
}

void Reader::expect_end() const {
  if (pos_ != data_.size()) throw WireError("a message from the plugin's process is longer than its fields");
}

bool send_frame(int fd, std::string_view payload, std::string* why) {
  const uint64_t len = payload.size();
  std::string frame(reinterpret_cast<const char*>(&len), sizeof len);
  frame.append(payload.data(), payload.size());
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = std::string("cannot write to it: ") + std::generic_category().message(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

namespace {
// Reads exactly n bytes; false at end of stream or on error.
bool read_exact(int fd, char* out, size_t n, std::string* why) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::recv(fd, out + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      *why = std::string("cannot read from it: ") + std::generic_category().message(errno);
      return false;
    }
    if (got == 0) {
      *why = "it closed its end";
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}
}  // namespace

bool recv_frame(int fd, std::string* payload, std::string* why) {
  uint64_t len = 0;
  if (!read_exact(fd, reinterpret_cast<char*>(&len), sizeof len, why)) return false;
  if (len > kMaxFrameBytes) {
    *why = "it sent a message of " + std::to_string(len) + " bytes (the limit is " + std::to_string(kMaxFrameBytes) + ")";
    return false;
  }
  payload->resize(len);
  return read_exact(fd, payload->data(), len, why);
}

}  // namespace cotune::core::isolation
