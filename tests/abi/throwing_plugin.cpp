// ABI test fixture: a C++ predictor (through cotune.hpp) whose calls throw, to show that every
// exception becomes an error object at the boundary and that nothing leaks.
#include <cotune/cotune.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

class Throwing {
 public:
  explicit Throwing(std::string_view options) {
    if (options.find("throw-in-create") != std::string_view::npos) throw std::runtime_error("create refused: asked to");
    buffer_.assign(1024, 1.0);  // something for LeakSanitizer to find if a path forgot to free
  }
  void fit(const double*, size_t, size_t, const double*, const double*) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "fit: this predictor never fits");
  }
  void predict(const double*, size_t n, size_t, double*, double*) {
    if (n == 1) throw 42;  // not even a std::exception
    throw std::out_of_range("predict: out of range");
  }

 private:
  std::vector<double> buffer_;
};

}  // namespace

COTUNE_PLUGIN(cotune::predictor<Throwing>({"org.cotune.test.throwing", "throwing", "Always throws.", "1.0.0"}))
