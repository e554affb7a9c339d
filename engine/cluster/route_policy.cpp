#include "engine/cluster/route_policy.h"

#include "engine/common/error.h"

namespace rose {

const std::vector<std::string>& route_policy_names() {
  static const std::vector<std::string> names{"round_robin", "least_loaded", "prefix", "precise"};
  return names;
}

void check_route_policy_name(const std::string& name) {
  for (const std::string& known : route_policy_names()) {
    if (name == known) return;
  }
  fail("--router '{}': unknown; expected round_robin, least_loaded, prefix or precise", name);
}

}  // namespace rose
