#include "redis/keys.h"

#include <cstring>

namespace sluice::redis {

void KeyBuffer::append(std::string_view bytes) {
  if (heap_.empty() && size_ + bytes.size() <= inline_.size()) {
    std::memcpy(inline_.data() + size_, bytes.data(), bytes.size());
  } else {
    if (heap_.empty()) heap_.assign(inline_.data(), size_);
    heap_.append(bytes);
  }
  size_ += bytes.size();
}

}  // namespace sluice::redis
