// libcotune-predictor-mlp: an ensemble of small ReLU networks (dlib DNN, Adam, early stopping) whose
// spread gives a standard deviation with each prediction. See mlp_options.hpp for the options.
#include "mlp_model.hpp"
#include "mlp_options.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/state_blob.hpp>

#include <sstream>
#include <string>
#include <string_view>

namespace cotune_mlp {
namespace {

constexpr const char* kId = "org.cotune.predictor.mlp";
constexpr uint32_t kStateVersion = 1;

class MlpPredictor {
 public:
  explicit MlpPredictor(std::string_view options_json) : options_(parse_options(options_json)) {}

  void fit(const double* x, size_t n, size_t d, const double* y, const double* w) {
    model_.fit(x, n, d, y, w, options_);
  }

  void predict(const double* x, size_t n, size_t d, double* out_mean, double* out_std) {
    model_.predict(x, n, d, out_mean, out_std);
  }

  std::string save() const {
    if (!model_.fitted())
      throw cotune::Error(COTUNE_ERR_FAILED_PRECONDITION, "mlp save: the model is not fitted; nothing to save");
    std::ostringstream payload;
    model_.serialize(payload);
    return cotune::support::wrap_state(kId, kStateVersion, payload.str());
  }

  void load(std::string_view bytes) {
    uint32_t version = 0;
    const std::string_view payload = cotune::support::unwrap_state(bytes, kId, kStateVersion, kStateVersion, &version);
    std::istringstream in{std::string(payload)};
    MlpModel loaded;
    try {
      loaded.deserialize(in);
    } catch (const std::exception& e) {
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string(kId) + ": cannot load saved state: " + e.what());
    }
    model_ = std::move(loaded);
  }

  std::string describe_fit() const { return model_.describe(); }

 private:
  Options options_;
  MlpModel model_;
};

}  // namespace
}  // namespace cotune_mlp

COTUNE_PLUGIN(cotune::predictor<cotune_mlp::MlpPredictor>(
    {"org.cotune.predictor.mlp", "mlp",
     "Ensemble of ReLU networks (dlib, Adam, early stopping) with a standard deviation per prediction.", "1.0.0",
     COTUNE_CAP_PREDICT_STD}))
