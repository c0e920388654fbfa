#pragma once
// What a kiln_service handle points to.

#include "cache/disk/disk_cache.hpp"
#include "runtime/cuda_backend.hpp"
#include "kiln/kiln.h"
#include "service_internal.hpp"

struct kiln_service {
  explicit kiln_service(int ordinal) : service(ordinal) {}
  // Why mutable: Service is safe from many threads, and the C functions that only read take a
  // const handle while InternalService::backend() is non-const.
  mutable kiln::InternalService service;
};
