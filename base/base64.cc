#include "base/base64.h"

#include <array>
#include <cstdint>

namespace armhive {
namespace {

constexpr std::string_view kB64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr uint8_t kNotB64 = 0xFF;

// Byte -> its 6-bit value, kNotB64 for anything outside the alphabet ('=' included).
constexpr std::array<uint8_t, 256> make_decode_table() {
  std::array<uint8_t, 256> t{};
  for (auto& v : t) v = kNotB64;
  for (size_t i = 0; i < kB64.size(); ++i)
    t[static_cast<unsigned char>(kB64[i])] = static_cast<uint8_t>(i);
  return t;
}
constexpr std::array<uint8_t, 256> kDecode = make_decode_table();

}  // namespace

// Both directions write into a string sized up front, one table look-up per character: guest
// file transfers move megabytes through here per agent call (daemon/virt/guest_file_transfer.h).
std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4, '=');
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  char* o = out.data();
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    *o++ = kB64[v >> 18];
    *o++ = kB64[(v >> 12) & 63];
    *o++ = kB64[(v >> 6) & 63];
    *o++ = kB64[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint32_t{in[i]} << 16;
    *o++ = kB64[v >> 18];
    *o++ = kB64[(v >> 12) & 63];
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8);
    *o++ = kB64[v >> 18];
    *o++ = kB64[(v >> 12) & 63];
    *o++ = kB64[(v >> 6) & 63];
  }
  return out;  // the rest is the '=' padding it was filled with
}

Result<std::string> base64_decode(std::string_view field, std::string_view text) {
  if (text.size() % 4 != 0) {
    return invalid_argument(std::string(field), "is not base64 (length not a multiple of 4)");
  }
  // Padding: one or two '=' ending the last quad ('=' anywhere else fails the table look-up).
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  std::string out(text.size() / 4 * 3 - pad, '\0');
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  char* o = out.data();
  const size_t body = text.size() - (pad > 0 ? 4 : 0);  // quads without padding
  for (size_t i = 0; i < body; i += 4) {
    const uint8_t a = kDecode[in[i]], b = kDecode[in[i + 1]], c = kDecode[in[i + 2]],
                  d = kDecode[in[i + 3]];
    if ((a | b | c | d) & 0xC0) return invalid_argument(std::string(field), "is not base64");
    const uint32_t v = (uint32_t{a} << 18) | (uint32_t{b} << 12) | (uint32_t{c} << 6) | d;
    *o++ = static_cast<char>(v >> 16);
    *o++ = static_cast<char>((v >> 8) & 0xFF);
    *o++ = static_cast<char>(v & 0xFF);
  }
  if (pad > 0) {
    const size_t i = body;
    const uint8_t a = kDecode[in[i]], b = kDecode[in[i + 1]];
    const uint8_t c = pad == 2 ? 0 : kDecode[in[i + 2]];
    if ((a | b | c) & 0xC0) return invalid_argument(std::string(field), "is not base64");
    const uint32_t v = (uint32_t{a} << 18) | (uint32_t{b} << 12) | (uint32_t{c} << 6);
    *o++ = static_cast<char>(v >> 16);
    if (pad == 1) *o++ = static_cast<char>((v >> 8) & 0xFF);
  }
  return out;
}

}  // namespace armhive
