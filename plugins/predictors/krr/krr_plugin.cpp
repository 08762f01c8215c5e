// libcotune-predictor-krr: weighted kernel ridge regression (RBF kernel) with leave-one-out
// hyper-parameters. See krr_model.hpp for the method and krr_options.hpp for the options.
#include "krr_model.hpp"
#include "krr_options.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/state_blob.hpp>

#include <sstream>
#include <string>
#include <string_view>

namespace cotune_krr {
namespace {

constexpr const char* kId = "org.cotune.predictor.krr";
// 2 adds the per-feature log compression; 1 (none) still loads.
constexpr uint32_t kStateVersion = 2;
constexpr uint32_t kOldestStateVersion = 1;

class KrrPredictor {
 public:
  explicit KrrPredictor(std::string_view options_json) : options_(parse_options(options_json)) {}

  void fit(const double* x, size_t n, size_t d, const double* y, const double* w) {
    model_.fit(x, n, d, y, w, options_);
  }

  // No standard deviation (the component does not claim COTUNE_CAP_PREDICT_STD): out_std is left
  // untouched, as the ABI says.
  void predict(const double* x, size_t n, size_t d, double* out_mean, double* /*out_std*/) const {
    model_.predict(x, n, d, out_mean);
  }

  std::string save() const {
    if (!model_.fitted())
      throw cotune::Error(COTUNE_ERR_FAILED_PRECONDITION, "krr save: the model is not fitted; nothing to save");
    std::ostringstream payload;
    model_.serialize(payload);
    return cotune::support::wrap_state(kId, kStateVersion, payload.str());
  }

  void load(std::string_view bytes) {
    uint32_t version = 0;
    const std::string_view payload = cotune::support::unwrap_state(bytes, kId, kOldestStateVersion, kStateVersion, &version);
    std::istringstream in{std::string(payload)};
    KrrModel loaded;
    try {
      loaded.deserialize(in, /*with_compression=*/version >= 2);
    } catch (const std::exception& e) {
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string(kId) + ": cannot load saved state: " + e.what());
    }
    model_ = std::move(loaded);
  }

  std::string describe_fit() const { return model_.describe(); }

 private:
  Options options_;
  KrrModel model_;
};

}  // namespace
}  // namespace cotune_krr

COTUNE_PLUGIN(cotune::predictor<cotune_krr::KrrPredictor>(
    {"org.cotune.predictor.krr", "krr",
     "Weighted kernel ridge regression (RBF kernel, leave-one-out gamma and lambda), log target by default.", "1.0.0"}))
