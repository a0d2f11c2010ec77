#include "http/exchange.h"

#include <cassert>

namespace sluice::http {

void Response::Reset() {
  status = 200;
  content_type = "application/json";
  header_count = 0;
  body.clear();
}

void Response::AddHeader(std::string_view name, std::string_view value) {
  assert(header_count < headers.size());
  Header& h = headers[header_count++];
  h.name = name;
  h.value.assign(value);
}

const std::string* Response::FindHeader(std::string_view name) const {
  for (size_t i = 0; i < header_count; ++i) {
    if (headers[i].name == name) return &headers[i].value;
  }
  return nullptr;
}

}  // namespace sluice::http
