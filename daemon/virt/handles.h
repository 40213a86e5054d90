#pragma once

#include <libvirt/libvirt.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace armhive {

// Move-only owners of libvirt objects. Each releases its reference with the matching
// vir*Free() in a noexcept destructor (which never fails the program: libvirt's free functions
// only drop a reference). Wrapping a null pointer gives an empty owner.
//
// Thread-safety: libvirt objects may be used from any thread; an owner itself is not
// synchronised (like std::unique_ptr).
template <typename T, int (*Free)(T)>
class LibvirtHandle {
 public:
  LibvirtHandle() = default;
  explicit LibvirtHandle(T ptr) noexcept : ptr_(ptr) {}
  ~LibvirtHandle() noexcept { reset(); }
  LibvirtHandle(LibvirtHandle&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  LibvirtHandle& operator=(LibvirtHandle&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  LibvirtHandle(const LibvirtHandle&) = delete;
  LibvirtHandle& operator=(const LibvirtHandle&) = delete;

  T get() const noexcept { return ptr_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  T release() noexcept { return std::exchange(ptr_, nullptr); }
  void reset(T ptr = nullptr) noexcept {
    if (ptr_ != nullptr) Free(ptr_);
    ptr_ = ptr;
  }

 private:
  T ptr_ = nullptr;
};

using DomainHandle = LibvirtHandle<virDomainPtr, virDomainFree>;
using NetworkHandle = LibvirtHandle<virNetworkPtr, virNetworkFree>;
using StoragePoolHandle = LibvirtHandle<virStoragePoolPtr, virStoragePoolFree>;
using StorageVolHandle = LibvirtHandle<virStorageVolPtr, virStorageVolFree>;
using ConnectHandle = LibvirtHandle<virConnectPtr, virConnectClose>;
// Only drops the reference: a stream with a transfer still in progress must be given
// virStreamAbort() (or have finished with virStreamFinish()) before its owner goes.
using StreamHandle = LibvirtHandle<virStreamPtr, virStreamFree>;

// A string libvirt allocated for the caller (virDomainGetXMLDesc, virConnectGetCapabilities,
// ...): released with free().
class LibvirtString {
 public:
  LibvirtString() = default;
  explicit LibvirtString(char* s) noexcept : s_(s) {}
  ~LibvirtString() noexcept { std::free(s_); }
  LibvirtString(LibvirtString&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
  LibvirtString& operator=(LibvirtString&& other) noexcept {
    if (this != &other) {
      std::free(s_);
      s_ = std::exchange(other.s_, nullptr);
    }
    return *this;
  }
  LibvirtString(const LibvirtString&) = delete;
  LibvirtString& operator=(const LibvirtString&) = delete;

  const char* get() const noexcept { return s_; }
  explicit operator bool() const noexcept { return s_ != nullptr; }
  std::string str() const { return s_ != nullptr ? std::string(s_) : std::string(); }

 private:
  char* s_ = nullptr;
};

// The records virConnectGetAllDomainStats() / virDomainListGetStats() return, released with
// virDomainStatsRecordListFree() (which also drops each record's domain reference).
class DomainStatsList {
 public:
  DomainStatsList() = default;
  explicit DomainStatsList(virDomainStatsRecordPtr* records) noexcept : records_(records) {}
  ~DomainStatsList() noexcept {
    if (records_ != nullptr) virDomainStatsRecordListFree(records_);
  }
  DomainStatsList(DomainStatsList&& other) noexcept
      : records_(std::exchange(other.records_, nullptr)) {}
  DomainStatsList& operator=(DomainStatsList&& other) noexcept {
    if (this != &other) {
      if (records_ != nullptr) virDomainStatsRecordListFree(records_);
      records_ = std::exchange(other.records_, nullptr);
    }
    return *this;
  }
  DomainStatsList(const DomainStatsList&) = delete;
  DomainStatsList& operator=(const DomainStatsList&) = delete;

  virDomainStatsRecordPtr* get() const noexcept { return records_; }

 private:
  virDomainStatsRecordPtr* records_ = nullptr;
};

}  // namespace armhive
