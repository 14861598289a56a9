# CAF 0.17.6 from Debian's libcaf-dev ships no CMake config: find it by path.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
find_library(CAF_OPENSSL_LIBRARY caf_openssl REQUIRED)
if(NOT EXISTS "${CAF_INCLUDE_DIR}/caf/type_id.hpp")
  message(FATAL_ERROR "CAF at ${CAF_INCLUDE_DIR} has no caf/type_id.hpp; caf-agent needs CAF 0.17.6")
endif()
add_library(caf::core SHARED IMPORTED)
set_target_properties(caf::core PROPERTIES
  IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
add_library(caf::io SHARED IMPORTED)
set_target_properties(caf::io PROPERTIES
  IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
  INTERFACE_LINK_LIBRARIES caf::core)
# Mutual TLS between nodes (runtime/tls.hpp): CAF's OpenSSL module, shipped by libcaf-dev.
add_library(caf::openssl SHARED IMPORTED)
set_target_properties(caf::openssl PROPERTIES
  IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
  INTERFACE_LINK_LIBRARIES caf::io)
message(STATUS "CAF: ${CAF_CORE_LIBRARY}")
