#include "base/json_depth.h"

#include <string>

namespace armhive {

Status check_json_depth(std::string_view text, std::string_view field, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped byte, whatever it is, cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) {
          return invalid_argument(std::string(field),
                                  "nests arrays and objects deeper than the limit of " +
                                      std::to_string(max_depth) + " levels (at byte " +
                                      std::to_string(i) + ")");
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return Status::ok();
}

}  // namespace armhive
