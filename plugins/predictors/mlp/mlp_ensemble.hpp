// An ensemble of small fully connected ReLU networks (dlib DNN), trained with Adam on a weighted
// squared loss with early stopping. It sees standardised data only; mlp_model.hpp does the rest.
// This is the one file that includes dlib's DNN headers (they are slow to compile).
#ifndef COTUNE_PREDICTOR_MLP_ENSEMBLE_HPP_
#define COTUNE_PREDICTOR_MLP_ENSEMBLE_HPP_

#include "mlp_options.hpp"

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <vector>

namespace cotune_mlp {

// How one network's training went.
struct MemberReport {
  size_t epochs = 0;             // epochs run before stopping
  size_t best_epoch = 0;         // epoch of the kept parameters (1-based)
  double validation_loss = 0;    // weighted MSE on the held-back rows (standardised units); -1: none
  size_t validation_rows = 0;
};

class Ensemble {
 public:
  Ensemble();
  ~Ensemble();
  Ensemble(Ensemble&&) noexcept;
  Ensemble& operator=(Ensemble&&) noexcept;

  // Trains options.ensemble networks on n rows of d standardised features (row-major) with
  // standardised targets and positive weights. Replaces any earlier networks.
  void train(const std::vector<float>& rows, size_t n, size_t d, const std::vector<float>& targets,
             const std::vector<double>& weights, const Options& options);

  // Each network's predictions for n standardised rows: out[k * n + i] for network k.
  void predict(const float* rows, size_t n, size_t d, std::vector<float>& out);

  size_t size() const;
  const std::vector<MemberReport>& reports() const;

  void serialize(std::ostream& out) const;
  void deserialize(std::istream& in);  // throws on malformed input

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cotune_mlp

#endif  // COTUNE_PREDICTOR_MLP_ENSEMBLE_HPP_
