#include "tools/model/op_key.h"

#include <algorithm>

namespace ncclwatch::tools {

uint16_t FuncIds::Id(const std::string& name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  // Past 65,535 names (no real trace has them) they share the last id:
  // their operations then never settle on a name alone, and stay kept.
  const uint16_t id = static_cast<uint16_t>(std::min<size_t>(ids_.size() + 1, 65535));
  ids_.emplace(name, id);
  return id;
}

bool FuncIds::Find(const std::string& name, uint16_t* id) const {
  auto it = ids_.find(name);
  if (it == ids_.end()) return false;
  *id = it->second;
  return true;
}

OpKey OpKeyOf(const trace::Op& o, uint64_t comm_hash, uint16_t func) {
  OpKey k;
  k.comm_hash = comm_hash;
  k.func = func;
  k.p2p = o.kind() == trace::OP_KIND_P2P;
  // As the model reads them (ModelLoader::Add: Op::seq, Op::peer_or_root).
  k.seq = k.p2p ? o.p2p_seq() : o.seq();
  k.peer = k.p2p ? o.peer() : 0;
  return k;
}

bool OpKeyOf(const Model& m, const Op& op, const FuncIds& names, OpKey* key) {
  if (op.comm >= m.comms.size() || !names.Find(m.Str(op.func), &key->func)) return false;
  key->comm_hash = m.comms[op.comm].hash;
  key->p2p = op.kind == OpKind::kP2p;
  key->seq = op.seq;
  key->peer = key->p2p ? op.peer_or_root : 0;
  return true;
}

}  // namespace ncclwatch::tools
