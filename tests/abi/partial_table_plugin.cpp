// ABI test fixture: a space whose function table offers table_schema but neither table_read nor
// table_write (a 1.4 table schema comes whole or not at all). The host must refuse the library.
#include <cotune/cotune.hpp>

#include <string>
#include <vector>

namespace {

class OneParam {
 public:
  OneParam(std::string_view, std::string_view) { params_.add_int("x", {1, 2}, 1, "", "The only parameter."); }
  const cotune::ParamList& params() const { return params_; }
  void check(const double*, size_t n, int32_t* valid) { std::fill(valid, valid + n, 1); }
  std::string explain(const double*) { return ""; }
  size_t sample(uint64_t, size_t n, double* out) {
    std::fill(out, out + n, 1.0);
    return n;
  }
  const std::vector<std::string>& feature_names() const { return features_; }
  void featurize(const double* c, size_t n, double* out) { std::copy(c, c + n, out); }
  std::string render(const double* c, int32_t) { return "{\"x\": " + std::to_string(int(c[0])) + "}"; }
  static std::string table_schema() { return "{\"columns\": [\"x\"], \"config_columns\": [\"x\"]}"; }
  static std::string table_read(std::string_view) { return "{}"; }
  static std::string table_write(std::string_view, std::string_view) { return "{}"; }

 private:
  cotune::ParamList params_;
  std::vector<std::string> features_{"x"};
};

cotune_component partial_component() {
  static cotune_space_api api = *cotune::detail::SpaceAdapter<OneParam>::api();
  api.table_read = nullptr;
  api.table_write = nullptr;
  cotune_component c = cotune::space<OneParam>({"org.cotune.test.partial-table", "partial-table",
                                                "A table schema without its reader.", "1.0.0"});
  c.api = &api;
  return c;
}

}  // namespace

COTUNE_PLUGIN(partial_component())
