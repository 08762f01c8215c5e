// Options of the mlp predictor (the JSON object given at create()).
//
//   hidden               [64, 64]  sizes of the 2 or 3 hidden layers (fully connected + ReLU)
//   ensemble             5         independently seeded networks; their spread is the predicted
//                                  standard deviation
//   max_epochs           300       passes over the training rows per network
//   patience             50        early stopping: epochs without a better validation loss
//   validation_fraction  0.2       rows held back per network for early stopping (each network
//                                  draws its own split); with fewer than 10 rows nothing is held
//                                  back and every network trains for max_epochs
//   batch_size           32
//   learning_rate        0.01      Adam step size (small nets on small data learn slowly at 0.001)
//   weight_decay         0.0001    Adam weight decay
//   seed                 0         seeds initialisation, splits and shuffles: equal inputs and seed
//                                  give equal models
//   log                  true      fit log(target) (targets must be > 0); {"log": false} for
//                                  residuals that may be negative
#ifndef COTUNE_PREDICTOR_MLP_OPTIONS_HPP_
#define COTUNE_PREDICTOR_MLP_OPTIONS_HPP_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cotune_mlp {

struct Options {
  std::vector<long> hidden{64, 64};
  size_t ensemble = 5;
  size_t max_epochs = 300;
  size_t patience = 50;
  double validation_fraction = 0.2;
  size_t batch_size = 32;
  double learning_rate = 0.01;
  double weight_decay = 1e-4;
  uint64_t seed = 0;
  bool log_target = true;
};

// Parses the options JSON ("" means {}); throws cotune::Error(INVALID_ARGUMENT) naming the field.
Options parse_options(std::string_view json);

}  // namespace cotune_mlp

#endif  // COTUNE_PREDICTOR_MLP_OPTIONS_HPP_
