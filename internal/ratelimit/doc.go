// Package ratelimit limits how often each client may call the API, in
// memory bounded by a fixed number of tracked clients.
//
// Each key (usually a client address from [ClientAddr]) has a token bucket:
// it holds up to Burst tokens, refills at PerSecond, and each request takes
// one. A request that finds the bucket empty is refused and told how long
// until the next token. A bucket is stored as one timestamp, the time at
// which it will be full again (the generic cell rate algorithm), so nothing
// runs in the background to refill buckets.
//
// A [Limiter] tracks at most maxKeys buckets. When it must forget one to make
// room for a new key it forgets the one closest to full: a full bucket if
// there is one, since a full bucket is the same as a fresh one and forgetting
// it loses nothing, else the bucket owing the fewest tokens. A throttled
// client's bucket is therefore forgotten only when no other tracked bucket is
// closer to full, so flooding the table with fresh keys does not set it
// free. A client that controls about maxKeys keys and drains each of them
// after its own can still push itself out and be forgiven: with bounded
// memory that can be made expensive, not impossible. A host usually owns a
// whole IPv6 /64, so key IPv6 clients by prefix, not by address.
//
// [Failures] uses the same buckets to count failed authentication per source,
// so a source guessing keys is refused before its keys are even checked.
package ratelimit
