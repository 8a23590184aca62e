// Rendering a model spec back to TOML: what parse_spec reads back to the same spec, with only the
// keys that differ from the defaults inside each layer.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "io/toml.h"
#include "model/layer_kinds.h"
#include "model/spec.h"

namespace xo {
namespace {

// One layer as an inline TOML table, with only the keys that differ from the defaults.
std::string layer_toml(const LayerSpec& l) {
  return fmt::format("{{ type = \"{}\"{} }}", layer_type_name(l.type),
                     layer_kind(l.type).settings_toml(l));
}

// Every setting the optimizer's type reads, in the order of torch.optim's signature.
std::string optimizer_toml(const OptimizerSettings& o) {
  const char* type = optimizer_type_name(o.type);
  switch (o.type) {
    case OptimizerType::SGD:
      return fmt::format(
          "{{ type = \"{}\", lr = {}, momentum = {}, dampening = {}, nesterov = {}, "
          "weight_decay = {} }}",
          type, toml_float(o.lr), toml_float(o.momentum), toml_float(o.dampening), o.nesterov,
          toml_float(o.weight_decay));
    case OptimizerType::RMSprop:
      return fmt::format("{{ type = \"{}\", lr = {}, alpha = {}, eps = {}, weight_decay = {} }}",
                         type, toml_float(o.lr), toml_float(o.alpha), toml_float(o.eps),
                         toml_float(o.weight_decay));
    case OptimizerType::Adadelta:
      return fmt::format("{{ type = \"{}\", lr = {}, rho = {}, eps = {}, weight_decay = {} }}",
                         type, toml_float(o.lr), toml_float(o.rho), toml_float(o.eps),
                         toml_float(o.weight_decay));
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      return fmt::format(
          "{{ type = \"{}\", lr = {}, beta1 = {}, beta2 = {}, eps = {}, weight_decay = {} }}", type,
          toml_float(o.lr), toml_float(o.beta1), toml_float(o.beta2), toml_float(o.eps),
          toml_float(o.weight_decay));
  }
  XO_ASSERT(false && "optimizer type missing from optimizer_toml");
}

// [train.schedule] with every field its type reads; the monitor and t_max only where the spec set
// them (their defaults depend on the data and on train.epochs, which may be overridden).
std::string schedule_toml(const ScheduleSettings& s) {
  std::string out = fmt::format("[train.schedule]\ntype = \"{}\"\n", schedule_type_name(s.type));
  switch (s.type) {
    case ScheduleType::Step:
      out += fmt::format("step_size = {}\ngamma = {}\n", s.step_size, toml_float(s.gamma));
      break;
    case ScheduleType::Cosine:
      if (s.t_max > 0) out += fmt::format("t_max = {}\n", s.t_max);
      out += fmt::format("eta_min = {}\n", toml_float(s.eta_min));
      break;
    case ScheduleType::Plateau:
      if (s.monitor) out += fmt::format("monitor = \"{}\"\n", metric_name(*s.monitor));
      out += fmt::format("factor = {}\npatience = {}\nthreshold = {}\ncooldown = {}\nmin_lr = {}\n",
                         toml_float(s.factor), s.patience, toml_float(s.threshold), s.cooldown,
                         toml_float(s.min_lr));
      break;
  }
  return out + "\n";
}

std::string early_stopping_toml(const EarlyStoppingSettings& e) {
  std::string out = "[train.early_stopping]\n";
  if (e.monitor) out += fmt::format("monitor = \"{}\"\n", metric_name(*e.monitor));
  return out + fmt::format("patience = {}\nmin_delta = {}\nrestore_best = {}\n\n", e.patience,
                           toml_float(e.min_delta), e.restore_best);
}

}  // namespace

std::string to_toml(const ModelSpec& spec) {
  std::string out = "[model]\n";
  out += fmt::format("name = {}\n", toml_string(spec.name));
  out += fmt::format("input = [{}]\n", fmt::join(spec.input, ", "));
  out += "layers = [\n";
  for (const LayerSpec& l : spec.layers) out += fmt::format("  {},\n", layer_toml(l));
  out += fmt::format("]\nloss = \"{}\"\n", loss_name(spec.loss));
  if (!spec.init.empty()) out += fmt::format("init = {}\n", toml_string(spec.init));
  out += "\n[train]\n";
  out += fmt::format("optimizer = {}\n", optimizer_toml(spec.train.optimizer));
  out += fmt::format("batch = {}\nepochs = {}\nshuffle = {}\nseed = {}\n\n", spec.train.batch,
                     spec.train.epochs, spec.train.shuffle, spec.train.seed);
  if (spec.train.schedule) out += schedule_toml(*spec.train.schedule);
  if (spec.train.early_stopping) out += early_stopping_toml(*spec.train.early_stopping);
  if (spec.data.source.empty()) {  // an imported model's: none named yet
    out += fmt::format(
        "[data]\n# source = \"csv:PATH\"  (none yet: csv:PATH, fashion-mnist, idx:DIR, imdb:DIR or "
        "imdb-synthetic)\nsamples = {}\n",
        spec.data.samples);
  } else if (spec.data.source == "disc" || spec.data.source == "imdb-synthetic") {
    out += fmt::format("[data]\nsource = {}\nsamples = {}\n", toml_string(spec.data.source),
                       spec.data.samples);
  } else {  // a file or a data set brings its own rows
    out += fmt::format("[data]\nsource = {}\n", toml_string(spec.data.source));
  }
  if (spec.data.test_samples > 0) out += fmt::format("test_samples = {}\n", spec.data.test_samples);
  if (!spec.data.test.empty()) out += fmt::format("test = {}\n", toml_string(spec.data.test));
  if (spec.data.validation_split > 0) {
    out += fmt::format("validation_split = {}\n", toml_float(spec.data.validation_split));
  }
  return out;
}

}  // namespace xo
