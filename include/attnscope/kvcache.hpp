// attnscope/kvcache.hpp — umbrella header of the KV-cache module: the attention each head loses under a KV-cache
// eviction policy, simulated open-loop on the q, k and v of an unmodified forward pass. Policies (one header each):
// StreamingLLM (streaming.hpp), the oracle (oracle.hpp), H2O (h2o.hpp), TOVA (tova.hpp), SnapKV (snapkv.hpp); their
// specs (policy.hpp, policy_spec.hpp); the simulator of one layer (simulate.hpp). Needs only Eigen (it uses core,
// kernels and stream; the model's q, k, v reach it as plain matrices).
#pragma once

#include "attnscope/kvcache/h2o.hpp"
#include "attnscope/kvcache/oracle.hpp"
#include "attnscope/kvcache/policy.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/query_rows.hpp"
#include "attnscope/kvcache/simulate.hpp"
#include "attnscope/kvcache/snapkv.hpp"
#include "attnscope/kvcache/streaming.hpp"
#include "attnscope/kvcache/tova.hpp"
