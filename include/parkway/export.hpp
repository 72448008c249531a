// parkway/export.hpp -- marks what libparkway.so exports.
#pragma once

#define PARKWAY_API __attribute__((visibility("default")))
