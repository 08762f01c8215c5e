// Takes typed values off the front of a fuzz input, so that one byte string drives a structured
// test case. Reading past the end gives zeros (and empty strings), never an error: every input,
// however short, is a valid test case.
#ifndef COTUNE_TESTS_FUZZ_BYTE_READER_HPP_
#define COTUNE_TESTS_FUZZ_BYTE_READER_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

namespace cotune::fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  // Up to `n` bytes (fewer at the end of the input).
  std::string bytes(size_t n) {
    const size_t take = n < size_ - at_ ? n : size_ - at_;
    std::string s(reinterpret_cast<const char*>(data_ + at_), take);
    at_ += take;
    return s;
  }
  // Everything not read yet.
  std::string rest() { return bytes(size_ - at_); }
  size_t left() const { return size_ - at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace cotune::fuzz

#endif  // COTUNE_TESTS_FUZZ_BYTE_READER_HPP_
