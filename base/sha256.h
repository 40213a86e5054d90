#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// SHA-256 as 64 lowercase hex digits (OpenSSL EVP). Pure functions, any thread.
std::string sha256_hex(std::string_view data);

// Streams the file; kNotFound if it does not exist, kUnavailable if it cannot be read.
Result<std::string> sha256_file(const std::string& path);

// Incremental hashing for values made of several parts (e.g. a recipe and its files).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  std::string hex_digest();  // finishes; the object is spent afterwards

 private:
  void* ctx_;  // EVP_MD_CTX*, owned
};

}  // namespace armhive
