// A fake Jetson tree (support/jetson_tree.hpp) in a temporary folder of its own, removed with it.
#pragma once

#include <string>

#include "support/jetson_tree.hpp"
#include "support/temp_dir.hpp"

namespace zeus::testing {

namespace detail {
// A base listed before JetsonTree, so that the folder exists before the tree is written into it.
struct JetsonTreeFolder {
  TempDir folder{"zeus-jetson"};
};
}  // namespace detail

class TempJetsonTree : private detail::JetsonTreeFolder, public JetsonTree {
 public:
  explicit TempJetsonTree(const std::string& model = "NVIDIA Jetson AGX Orin Developer Kit")
      : JetsonTree(folder.path(), model) {}
};

}  // namespace zeus::testing
