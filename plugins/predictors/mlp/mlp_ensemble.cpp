#include "mlp_ensemble.hpp"

#include <dlib/dnn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace cotune_mlp {
namespace {

// Layer sizes are set at run time (set_num_outputs) before the first forward pass; the template
// arguments are only defaults.
using Input = dlib::input<dlib::matrix<float, 0, 1>>;
using Net2 = dlib::fc<1, dlib::relu<dlib::fc<64, dlib::relu<dlib::fc<64, Input>>>>>;
using Net3 = dlib::fc<1, dlib::relu<dlib::fc<64, dlib::relu<dlib::fc<64, dlib::relu<dlib::fc<64, Input>>>>>>>;

void set_sizes(Net2& net, const std::vector<long>& hidden) {
  dlib::layer<4>(net).layer_details().set_num_outputs(hidden[0]);
  dlib::layer<2>(net).layer_details().set_num_outputs(hidden[1]);
}
void set_sizes(Net3& net, const std::vector<long>& hidden) {
  dlib::layer<6>(net).layer_details().set_num_outputs(hidden[0]);
  dlib::layer<4>(net).layer_details().set_num_outputs(hidden[1]);
  dlib::layer<2>(net).layer_details().set_num_outputs(hidden[2]);
}

// Glorot-uniform weights and zero biases from our own seeded generator: dlib's fc_ draws its
// initial weights from std::rand(), which a plugin cannot seed without disturbing the host.
template <class Net>
void initialise(Net& net, dlib::rand& rnd) {
  dlib::visit_computational_layers(net, [&](auto& layer) {
    dlib::tensor& params = layer.get_layer_params();
    if (params.size() == 0) return;  // ReLU
    const long inputs = params.num_samples() - 1, outputs = params.k();  // fc_: (inputs + bias) x outputs
    const float bound = std::sqrt(6.0f / float(inputs + outputs));
    float* p = params.host();
    for (long r = 0; r < inputs; ++r)
      for (long c = 0; c < outputs; ++c) p[r * outputs + c] = bound * (2.0f * rnd.get_random_float() - 1.0f);
    for (long c = 0; c < outputs; ++c) p[inputs * outputs + c] = 0.0f;
  });
}

// dlib's forward(tensor) needs the input layer to have converted one sample first (it records how
// many tensor rows a sample becomes); a zero probe of d features does that.
template <class Net>
void prime(Net& net, size_t d) {
  dlib::matrix<float, 0, 1> probe = dlib::zeros_matrix<float>(long(d), 1);
  dlib::resizable_tensor scratch;
  net.to_tensor(&probe, &probe + 1, scratch);
}

struct TrainingSet {
  const std::vector<float>& rows;
  size_t d;
  const std::vector<float>& targets;
  const std::vector<double>& weights;
};

void gather(const TrainingSet& data, const size_t* idx, size_t count, dlib::resizable_tensor& x) {
  x.set_size(long(count), long(data.d));
  float* p = x.host();
  for (size_t i = 0; i < count; ++i) std::memcpy(p + i * data.d, &data.rows[idx[i] * data.d], data.d * sizeof(float));
}

template <class Net>
double weighted_loss(Net& net, const TrainingSet& data, const std::vector<size_t>& idx, dlib::resizable_tensor& x) {
  gather(data, idx.data(), idx.size(), x);
  const float* out = net.forward(x).host();
  double loss = 0, total = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    const double e = double(out[i]) - data.targets[idx[i]];
    loss += data.weights[idx[i]] * e * e;
    total += data.weights[idx[i]];
  }
  return loss / total;
}

void shuffle(std::vector<size_t>& v, dlib::rand& rnd) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(rnd.get_integer(static_cast<long long>(i)))]);
}

template <class Net>
MemberReport train_one(Net& net, const TrainingSet& data, size_t n, const Options& o, uint64_t seed) {
  dlib::rand rnd(static_cast<time_t>(seed));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  shuffle(order, rnd);
  const size_t held_back =
      n >= 10 ? std::max<size_t>(1, size_t(std::lround(double(n) * o.validation_fraction))) : 0;
  const std::vector<size_t> validation(order.begin(), order.begin() + long(held_back));
  std::vector<size_t> train(order.begin() + long(held_back), order.end());

  dlib::resizable_tensor x;
  set_sizes(net, o.hidden);
  prime(net, data.d);
  gather(data, train.data(), 1, x);
  net.forward(x);  // allocates the parameters
  initialise(net, rnd);

  std::vector<dlib::adam> solvers(Net::num_computational_layers,
                                  dlib::adam(float(o.weight_decay), 0.9f, 0.999f));
  MemberReport report;
  report.validation_rows = held_back;
  report.validation_loss = -1;
  Net best = net;
  double best_loss = std::numeric_limits<double>::infinity();
  size_t stale = 0;
  for (size_t epoch = 1; epoch <= o.max_epochs; ++epoch) {
    report.epochs = epoch;
    shuffle(train, rnd);
    for (size_t start = 0; start < train.size(); start += o.batch_size) {
      const size_t count = std::min(o.batch_size, train.size() - start);
      gather(data, train.data() + start, count, x);
      const float* out = net.forward(x).host();
      double batch_weight = 0;
      for (size_t i = 0; i < count; ++i) batch_weight += data.weights[train[start + i]];
      // Gradient of sum_i w_i (out_i - y_i)^2 / sum_i w_i with respect to the outputs.
      float* grad = net.get_gradient_input().host();
      for (size_t i = 0; i < count; ++i) {
        const size_t row = train[start + i];
        grad[i] = float(2.0 * data.weights[row] * (double(out[i]) - data.targets[row]) / batch_weight);
      }
      net.back_propagate_error(x);
      net.update_parameters(solvers, o.learning_rate);
    }
    if (held_back == 0) {
      report.best_epoch = epoch;
      continue;
    }
    const double loss = weighted_loss(net, data, validation, x);
    if (loss < best_loss) {
      best_loss = loss;
      best = net;
      report.best_epoch = epoch;
      report.validation_loss = loss;
      stale = 0;
    } else if (++stale >= o.patience) {
      break;
    }
  }
  if (held_back > 0) net = best;
  net.clean();
  return report;
}

template <class Net>
void train_all(std::vector<Net>& nets, std::vector<MemberReport>& reports, const TrainingSet& data, size_t n,
               const Options& o) {
  nets.assign(o.ensemble, Net());
  reports.clear();
  for (size_t k = 0; k < o.ensemble; ++k)
    reports.push_back(train_one(nets[k], data, n, o, o.seed * 1000003ull + k + 1));
}

template <class Net>
void predict_all(std::vector<Net>& nets, const float* rows, size_t n, size_t d, std::vector<float>& out) {
  constexpr size_t kChunk = 1024;
  out.resize(nets.size() * n);
  dlib::resizable_tensor x;
  for (Net& net : nets) prime(net, d);
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t count = std::min(kChunk, n - start);
    x.set_size(long(count), long(d));
    std::memcpy(x.host(), rows + start * d, count * d * sizeof(float));
    for (size_t k = 0; k < nets.size(); ++k) {
      const float* y = nets[k].forward(x).host();
      std::copy(y, y + count, out.begin() + long(k * n + start));
    }
  }
}

// Networks serialise through friend functions of dlib's layer classes, which only
// argument-dependent lookup finds (a qualified dlib::serialize picks an undefined declaration).
template <class Net>
void write_net(const Net& net, std::ostream& out) {
  serialize(net, out);
}
template <class Net>
void read_net(Net& net, std::istream& in) {
  deserialize(net, in);
}

}  // namespace

struct Ensemble::Impl {
  int depth = 0;  // hidden layers: 2 or 3; 0 when untrained
  std::vector<Net2> nets2;
  std::vector<Net3> nets3;
  std::vector<MemberReport> reports;
};

Ensemble::Ensemble() : impl_(std::make_unique<Impl>()) {}
Ensemble::~Ensemble() = default;
Ensemble::Ensemble(Ensemble&&) noexcept = default;
Ensemble& Ensemble::operator=(Ensemble&&) noexcept = default;

void Ensemble::train(const std::vector<float>& rows, size_t n, size_t d, const std::vector<float>& targets,
                     const std::vector<double>& weights, const Options& options) {
  auto fresh = std::make_unique<Impl>();
  const TrainingSet data{rows, d, targets, weights};
  fresh->depth = int(options.hidden.size());
  if (fresh->depth == 2)
    train_all(fresh->nets2, fresh->reports, data, n, options);
  else
    train_all(fresh->nets3, fresh->reports, data, n, options);
  impl_ = std::move(fresh);
}

void Ensemble::predict(const float* rows, size_t n, size_t d, std::vector<float>& out) {
  if (impl_->depth == 2)
    predict_all(impl_->nets2, rows, n, d, out);
  else
    predict_all(impl_->nets3, rows, n, d, out);
}

size_t Ensemble::size() const { return impl_->depth == 2 ? impl_->nets2.size() : impl_->nets3.size(); }
const std::vector<MemberReport>& Ensemble::reports() const { return impl_->reports; }

void Ensemble::serialize(std::ostream& out) const {
  dlib::serialize(impl_->depth, out);
  dlib::serialize(static_cast<uint64_t>(size()), out);
  for (const MemberReport& r : impl_->reports) {
    dlib::serialize(static_cast<uint64_t>(r.epochs), out);
    dlib::serialize(static_cast<uint64_t>(r.best_epoch), out);
    dlib::serialize(r.validation_loss, out);
    dlib::serialize(static_cast<uint64_t>(r.validation_rows), out);
  }
  for (const Net2& net : impl_->nets2) write_net(net, out);
  for (const Net3& net : impl_->nets3) write_net(net, out);
}

void Ensemble::deserialize(std::istream& in) {
  auto loaded = std::make_unique<Impl>();
  uint64_t count = 0;
  dlib::deserialize(loaded->depth, in);
  dlib::deserialize(count, in);
  if ((loaded->depth != 2 && loaded->depth != 3) || count == 0 || count > 64)
    throw dlib::serialization_error("bad network count or depth in the saved mlp ensemble");
  for (uint64_t k = 0; k < count; ++k) {
    MemberReport r;
    uint64_t epochs = 0, best_epoch = 0, rows = 0;
    dlib::deserialize(epochs, in);
    dlib::deserialize(best_epoch, in);
    dlib::deserialize(r.validation_loss, in);
    dlib::deserialize(rows, in);
    r.epochs = epochs;
    r.best_epoch = best_epoch;
    r.validation_rows = rows;
    loaded->reports.push_back(r);
  }
  if (loaded->depth == 2) {
    loaded->nets2.resize(count);
    for (Net2& net : loaded->nets2) read_net(net, in);
  } else {
    loaded->nets3.resize(count);
    for (Net3& net : loaded->nets3) read_net(net, in);
  }
  impl_ = std::move(loaded);
}

}  // namespace cotune_mlp
