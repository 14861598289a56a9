#pragma once
/// @file wire_limit.hpp
/// Records too large for the wire end as aborted records that say so.
///
/// CAF 0.17's BASP frames a message with a 32-bit payload length: a message past 4 GiB would
/// have its length wrap and corrupt the connection for every other message on it, and a
/// receiver allocates the announced length at once (the coordinator, for every record). The
/// trajectory store's frames have a 32-bit length too. So the rollout manager bounds each
/// record before it leaves: one past the limit keeps its identity and scores but loses its
/// tokens and texts, and becomes `aborted` with the sizes in its reason, so the episode still
/// ends in exactly one record and nothing half-sent reaches the driver.

#include <cstddef>

#include "messages/trajectory.hpp"

namespace caf_agent::rollout {

/// Largest record the rollout manager sends.
// Rationale: 100x a 200-turn, 131k-token episode with every observation at its 16 KiB cap
// (about 2.5 MB), and far below BASP's 4 GiB; the coordinator holds at most a few in memory.
inline constexpr std::size_t max_record_wire_bytes = std::size_t{256} << 20;

/// An upper bound of the serialized size of `r` (CAF binary or msgpack), in bytes.
std::size_t wire_bytes_bound(const messages::trajectory_record& r);

/// When `r` exceeds `limit`, turns it into an aborted record without tokens, logprobs, masks,
/// texts or observations, whose abort_reason names both sizes; returns whether it did.
bool fit_record_to_wire(messages::trajectory_record& r, std::size_t limit = max_record_wire_bytes);

}  // namespace caf_agent::rollout
