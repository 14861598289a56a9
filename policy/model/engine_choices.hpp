#pragma once
/// policy/model/engine_choices.hpp: the generation engine's closed sets as named enums
/// (base/named_enum.hpp): the model's dtype, how attention reads the KV cache, how keys are
/// stored. `engine_options` and `[policy]` (policy/config.hpp) hold them; TOML and the tools'
/// flags hold their names, the strings these settings were before. No torch types: the config
/// and the actors include it without LibTorch.

#include <cstdint>

#include "base/named_enum.hpp"

namespace caf_agent::policy {

/// The dtype the engine loads the model and keeps its KV cache in ([policy] dtype).
enum class model_dtype : uint8_t { float32, bfloat16, float16 };
CAF_AGENT_ENUM_NAMES(model_dtype, "float32", "bfloat16", "float16")

/// How decode steps and prefills after a cached prefix read the KV cache ([policy]
/// cache_attention): `automatic` ("auto") takes flash where it applies, else sdpa; the others
/// ask for that kernel (policy::cache_attention in decoder.hpp is what the engine then runs).
enum class cache_attention_choice : uint8_t { automatic, sdpa, matmul, flash };
CAF_AGENT_ENUM_NAMES(cache_attention_choice, "auto", "sdpa", "matmul", "flash")

/// How the engine stores keys ([policy] kv_layout): a preallocated row of max_context tokens
/// per sequence (`slots`), or blocks taken from one pool as sequences grow (`paged`).
enum class kv_layout_kind : uint8_t { slots, paged };
CAF_AGENT_ENUM_NAMES(kv_layout_kind, "slots", "paged")

/// The KV cache's element type ([policy] kv_cache_dtype): the model's dtype (`auto`), or 8-bit
/// floats (`fp8_e4m3`: each key and value rounded to e4m3, saturated at +-448, no scale), half
/// the bytes a decode step reads.
enum class kv_cache_dtype_kind : uint8_t { automatic, fp8_e4m3 };
CAF_AGENT_ENUM_NAMES(kv_cache_dtype_kind, "auto", "fp8_e4m3")

}  // namespace caf_agent::policy
