// The sharding planner (see planner.hpp).
#include "planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cotune_recsys {
namespace {

constexpr double kIdBytes = 8;      // int64 ids
constexpr double kLengthBytes = 4;  // one int32 length per sample and feature
constexpr double kPoolBytes = 4;    // lookups pool in fp32
constexpr double GiB = 1073741824.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / GiB);
  return buf;
}

// The work one shard puts on the GPU that holds it.
struct ShardWork {
  double lookup = 0, host = 0, backward = 0, update = 0, update_host = 0, hbm = 0, host_mem = 0, ids = 0, out = 0;
};

ShardWork shard_work(const Workload& w, const Config& c, const Table& t, double rows, double cols, double samples) {
  ShardWork s;
  const double e = c.emb_bytes();
  const double frac = rows / t.rows;
  const double lookups = samples * t.pooling * frac;
  const double read = lookups * cols * e;
  const double unique_rows = std::min(rows, lookups);
  const double update = unique_rows * (2 * cols * e + 2 * optimizer_bytes_per_row(w));
  const double storage = rows * (cols * e + optimizer_bytes_per_row(w));
  // An HBM cache of cache_ratio of the rows serves cache_ratio^(1 - skew) of the lookups (power-law access).
  const double hit = c.offload ? std::pow(c.cache_ratio, 1 - t.skew) : 1;
  s.lookup = read * hit + samples * cols * kPoolBytes;
  s.host = read * (1 - hit);
  s.backward = samples * cols * kPoolBytes + lookups * cols * kPoolBytes;
  s.update = update * hit;
  s.update_host = update * (1 - hit);
  s.hbm = c.offload ? storage * c.cache_ratio : storage;
  s.host_mem = c.offload ? storage : 0;
  s.ids = lookups * kIdBytes + samples * kLengthBytes;
  s.out = samples * cols;  // elements; times the all-to-all precision where used
  return s;
}

void add(GpuLoad& g, const ShardWork& s) {
  g.lookup_bytes += s.lookup;
  g.host_bytes += s.host;
  g.backward_bytes += s.backward;
  g.update_bytes += s.update;
  g.update_host_bytes += s.update_host;
  g.hbm += s.hbm;
  g.host += s.host_mem;
  g.id_recv += s.ids;
}

double work_time_bytes(const ShardWork& s, double host_factor) {
  return s.lookup + s.backward + s.update + host_factor * (s.host + s.update_host);
}

struct Pending {
  uint32_t table;
  double col_offset, cols;
  double time, hbm, host;
  double cost;
};

}  // namespace

double GpuLoad::time_bytes() const {
  return lookup_bytes + backward_bytes + update_bytes + host_factor * (host_bytes + update_host_bytes);
}

double optimizer_bytes_per_row(const Workload& w) {
  return w.training.emb_optimizer == EmbOptimizer::kRowwiseAdagrad ? 4 : 0;
}

Sharding classify(const Table& t, const Config& c) {
  // Stored size in the configured precision decides replication; rows decide the large-table type.
  if (t.rows * t.dim * c.emb_bytes() < c.replicate_bytes) return Sharding::kDataParallel;
  if (t.rows > c.large_rows) return c.large_sharding;
  return Sharding::kTableWise;
}

void make_plan(const Workload& w, const Config& c, const PlanTarget& target, Plan& p) {
  const size_t G = static_cast<size_t>(target.gpus);
  const size_t gpn = static_cast<size_t>(std::min(target.gpus, target.gpus_per_node));
  const size_t nodes = (G + gpn - 1) / gpn;
  const double b = c.batch_per_gpu, Bm = b * target.gpus;
  const double ob = c.a2a_bytes();
  const double hf = target.host_cost_factor;
  std::vector<Shard> shards = std::move(p.shards);
  std::vector<GpuLoad> gpu = std::move(p.gpu);
  p = Plan{};
  p.shards = std::move(shards);  // keeps the capacity: the planner runs per configuration
  p.gpu = std::move(gpu);
  p.shards.clear();
  p.gpu.assign(G, GpuLoad{});
  for (GpuLoad& g : p.gpu) g.host_factor = hf;

  std::vector<Pending> pending;
  pending.reserve(w.tables.size() * 4);
  std::vector<uint32_t> twrw;
  double total_time = 0, total_hbm = 0;
  for (uint32_t i = 0; i < w.tables.size(); ++i) {
    const Table& t = w.tables[i];
    const Sharding s = classify(t, c);
    if (s == Sharding::kDataParallel) {
      ++p.replicated_tables;
      const double e = c.emb_bytes();
      p.dp_hbm += t.rows * (t.dim * e + optimizer_bytes_per_row(w));
      p.dp_lookup_bytes += b * t.pooling * t.dim * e + b * t.dim * kPoolBytes;
      p.dp_backward_bytes += 2 * b * t.pooling * t.dim * kPoolBytes;
      p.dp_update_bytes += t.rows * (2 * t.dim * e + 2 * optimizer_bytes_per_row(w) + t.dim * kPoolBytes);
      // DDP's gradient of a replicated table is dense, in the table's precision: all-reduced each step,
      // and held on every GPU.
      p.dp_grad_bytes += t.rows * t.dim * e;
      p.dp_grad_hbm += t.rows * t.dim * e;
      p.shards.push_back({i, s, 0, t.rows, 0, t.dim, -1});
      continue;
    }
    ++p.sharded_tables;
    if (s == Sharding::kRowWise) {
      // One slice of the rows per GPU: balanced by construction, placed first.
      p.id_send += b * t.pooling * kIdBytes + b * kLengthBytes;
      p.rw_reduce += Bm * t.dim * ob;
      for (size_t g = 0; g < G; ++g) {
        const double rows = row_block_rows(t.rows, double(G), double(g));
        const ShardWork sw = shard_work(w, c, t, rows, t.dim, Bm);
        add(p.gpu[g], sw);
        total_time += work_time_bytes(sw, hf);
        total_hbm += sw.hbm;
        p.shards.push_back({i, s, row_block_offset(t.rows, double(G), double(g)), rows, 0, t.dim, static_cast<int32_t>(g)});
      }
      continue;
    }
    if (s == Sharding::kTableRowWise) {
      p.id_send += b * t.pooling * kIdBytes + b * kLengthBytes;
      p.out_recv += b * t.dim * ob;
      twrw.push_back(i);
      const ShardWork sw = shard_work(w, c, t, t.rows, t.dim, Bm);
      total_time += work_time_bytes(sw, hf);
      total_hbm += sw.hbm;
      continue;
    }
    const double split = s == Sharding::kColumnWise ? column_block_width(t.dim, c.column_split) : t.dim;
    for (long long piece = 0; double(piece) * split < t.dim; ++piece) {
      const double off = double(piece) * split;
      const double cols = std::min(split, t.dim - off);
      const ShardWork sw = shard_work(w, c, t, t.rows, cols, Bm);
      p.id_send += sw.ids / target.gpus;  // each GPU sends the ids of its own samples
      p.out_recv += b * cols * ob;
      pending.push_back({i, off, cols, work_time_bytes(sw, hf), sw.hbm, sw.host_mem, 0});
      total_time += pending.back().time;
      total_hbm += sw.hbm;
    }
  }

  const double budget = target.hbm_budget - p.dp_hbm - p.dp_grad_hbm;
  if (budget < 0) {
    p.why = "replicated tables (under replicate_below_mib) need " + gib(p.dp_hbm + p.dp_grad_hbm) +
            " on every GPU with their gradients, more than the " + gib(std::max(0.0, target.hbm_budget)) +
            " left after the dense part";
    return;
  }
  // Row-wise shards were placed first, one slice on every GPU: they must fit before anything else is.
  for (size_t g = 0; g < G; ++g) {
    if (p.gpu[g].hbm <= budget) continue;
    std::string largest;
    double most = -1;
    for (const Shard& sh : p.shards)
      if (sh.rank == static_cast<int32_t>(g) && sh.type == Sharding::kRowWise) {
        const Table& t = w.tables[sh.table];
        const double bytes = shard_work(w, c, t, sh.rows, sh.cols, Bm).hbm;
        if (bytes > most) most = bytes, largest = t.name;
      }
    p.why = "the row-wise shards need " + gib(p.gpu[g].hbm) + " on each GPU (table '" + largest + "' " + gib(most) +
            "), but " + gib(std::max(0.0, budget)) + " is left for embeddings";
    return;
  }
  // The balance objective: time-equivalent bytes, HBM bytes, or both normalised.
  auto cost_of = [&](double time, double hbm) {
    switch (c.balance) {
      case Balance::kLookups: return time;
      case Balance::kMemory: return hbm;
      default: return (total_time > 0 ? time / total_time : 0) + (total_hbm > 0 ? hbm / total_hbm : 0);
    }
  };
  for (GpuLoad& g : p.gpu) g.cost = cost_of(g.time_bytes(), g.hbm);

  // Table-row-wise: each table's rows split over the GPUs of one node; the node with the least load.
  for (uint32_t i : twrw) {
    const Table& t = w.tables[i];
    double best = 0;
    size_t best_node = nodes;
    for (size_t n = 0; n < nodes; ++n) {
      const size_t first = n * gpn, count = std::min(gpn, G - first);
      double load = 0;
      bool fits = true;
      for (size_t k = 0; k < count; ++k) {
        const double rows = row_block_rows(t.rows, double(count), double(k));
        fits = fits && p.gpu[first + k].hbm + shard_work(w, c, t, rows, t.dim, Bm).hbm <= budget;
        load += p.gpu[first + k].cost;
      }
      if (fits && (best_node == nodes || load < best)) best = load, best_node = n;
    }
    if (best_node == nodes) {
      p.why = "table '" + t.name + "' (table_row_wise, " + gib(shard_work(w, c, t, t.rows, t.dim, Bm).hbm) +
              ") does not fit on the GPUs of any node: " + gib(budget) + " per GPU is left for embeddings";
      return;
    }
    const size_t first = best_node * gpn, count = std::min(gpn, G - first);
    for (size_t k = 0; k < count; ++k) {
      const double lo = row_block_offset(t.rows, double(count), double(k));
      const double hi = lo + row_block_rows(t.rows, double(count), double(k));
      const ShardWork sw = shard_work(w, c, t, hi - lo, t.dim, Bm);
      GpuLoad& g = p.gpu[first + k];
      add(g, sw);
      g.twrw_reduce += Bm * t.dim * ob;
      g.out_send += Bm * t.dim * ob / count;
      g.cost = cost_of(g.time_bytes(), g.hbm);
      p.shards.push_back({i, Sharding::kTableRowWise, lo, hi - lo, 0, t.dim, static_cast<int32_t>(first + k)});
    }
  }

  // Table- and column-wise shards, largest cost first (ties by table and column for determinism).
  for (Pending& s : pending) s.cost = cost_of(s.time, s.hbm);
  std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& x) {
    if (a.cost != x.cost) return a.cost > x.cost;
    if (a.table != x.table) return a.table < x.table;
    return a.col_offset < x.col_offset;
  });
  // Offloaded shards also fill their node's host memory: a GPU whose node has no room left for one is
  // passed over (else the cheapest GPUs, all on the first node, would take every table).
  std::vector<double> node_host(nodes, 0);
  for (size_t g = 0; g < G; ++g) node_host[g / gpn] += p.gpu[g].host;
  for (const Pending& s : pending) {
    size_t best = G;
    bool host_full = false;
    for (size_t g = 0; g < G; ++g) {
      if (p.gpu[g].hbm + s.hbm > budget) continue;
      if (c.offload && node_host[g / gpn] + s.host > target.host_bytes_per_node) {
        host_full = true;
        continue;
      }
      if (best == G || p.gpu[g].cost < p.gpu[best].cost) best = g;
    }
    const Table& t = w.tables[s.table];
    if (best == G && host_full) {
      p.why = "table '" + t.name + "' (" + gib(s.host) + " offloaded) fits the host memory of no node: " +
              gib(target.host_bytes_per_node) + " per node" +
              (target.host_bytes_per_node > 0 ? "" : " (set cluster.host_gib_per_node)");
      return;
    }
    if (best == G) {
      double most_free = 0;
      for (const GpuLoad& g : p.gpu) most_free = std::max(most_free, budget - g.hbm);
      p.why = "table '" + t.name + "'" + (s.cols < t.dim ? " (columns " + std::to_string(int64_t(s.col_offset)) + "+" +
                                                               std::to_string(int64_t(s.cols)) + ")"
                                                         : std::string()) +
              " needs " + gib(s.hbm) + " but the GPU with the most room has " + gib(most_free) + " left for embeddings";
      return;
    }
    const Sharding type = s.cols < t.dim ? Sharding::kColumnWise : classify(t, c);
    const ShardWork sw = shard_work(w, c, t, t.rows, s.cols, Bm);
    GpuLoad& g = p.gpu[best];
    add(g, sw);
    node_host[best / gpn] += sw.host_mem;
    g.out_send += sw.out * ob * (target.gpus - 1) / target.gpus;
    g.cost = cost_of(g.time_bytes(), g.hbm);
    p.shards.push_back({s.table, type == Sharding::kDataParallel ? Sharding::kTableWise : type, 0, t.rows,
                        s.col_offset, s.cols, static_cast<int32_t>(best)});
  }

  // Totals and the checks that need the whole placement.
  double sum = 0;
  for (size_t g = 0; g < G; ++g) {
    const double tb = p.gpu[g].time_bytes();
    sum += tb;
    if (tb > p.max_time_bytes) p.max_time_bytes = tb, p.critical = g;
    p.max_hbm = std::max(p.max_hbm, p.gpu[g].hbm + p.dp_hbm + p.dp_grad_hbm);
  }
  p.mean_time_bytes = sum / target.gpus;
  for (size_t n = 0; n < nodes; ++n) {
    double host = 0;
    for (size_t g = n * gpn; g < std::min(G, (n + 1) * gpn); ++g) host += p.gpu[g].host;
    p.max_host_per_node = std::max(p.max_host_per_node, host);
  }
  if (c.offload && p.max_host_per_node > target.host_bytes_per_node) {
    p.why = "offloaded embeddings need " + gib(p.max_host_per_node) + " of host memory on the busiest node, more than "
            "its " + gib(target.host_bytes_per_node) +
            (target.host_bytes_per_node > 0 ? "" : " (set cluster.host_gib_per_node)");
    return;
  }
  p.ok = true;
}

double row_block_rows(double rows, double n, double k) {
  const double block = std::ceil(rows / n);
  return std::max(0.0, std::min(block, rows - k * block));
}

double row_block_offset(double rows, double n, double k) { return std::min(rows, k * std::ceil(rows / n)); }

double column_block_width(double dim, double min_partition) {
  for (int64_t i = std::max<int64_t>(static_cast<int64_t>(min_partition), 1); i < static_cast<int64_t>(dim); ++i)
    if (std::fmod(dim, static_cast<double>(i)) == 0 && i % 4 == 0) return static_cast<double>(i);
  return dim;
}

}  // namespace cotune_recsys
