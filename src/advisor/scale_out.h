// What scaling out buys: a data-parallel step on N devices predicted as each device's compute on
// its slice of the batch plus the part of the gradients' all-reduce that backward does not hide,
// the all-reduce modelled as a ring (NCCL's algorithm for large messages, and OpenMPI's for large
// messages on many ranks) over the link between the devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xo {

// The link an all-reduce runs over, per device and per direction: NVLink or PCIe between the GPUs
// of one machine, the network between machines, shared memory between the processes of one.
struct Link {
  std::string name;              // "NVLink 4", "PCIe 4 x16", "shared memory (measured)"
  double bytes_per_s = 0;        // point-to-point, each direction at once
  double latency_s = 0;          // per message step
  double reduce_s_per_byte = 0;  // the reduction's arithmetic where the host does it (0: fused)
  // Measured links: the point-to-point rate and the reduction's cost by message size (a message
  // that stays in the caches moves faster than one that goes through memory), ascending in bytes;
  // between two sizes interpolated in log-log, beyond them the nearest. Empty: the figures above.
  struct Sample {
    double bytes = 0, bytes_per_s = 0, reduce_s_per_byte = 0;
  };
  std::vector<Sample> samples;
  Sample at(double bytes) const;
};

// A measured link's sample from a ring's two phases timed on `ranks` ranks: the reduce-scatter's
// n-1 steps (each sends a chunk of `chunk_bytes` while receiving one, then adds it in) in
// `reduce_scatter_s`, the all-gather's n-1 steps (each sends the chunk last completed while
// receiving one) in `all_gather_s`, over a link of `latency_s` per message. An all-gather step is
// a transfer; what a reduce-scatter step takes beyond it is the addition. So that the ring model
// of a message of `ranks` chunks gives back the two phases' sum.
Link::Sample ring_phase_sample(double chunk_bytes, int ranks, double reduce_scatter_s,
                               double all_gather_s, double latency_s);

// A ring all-reduce of `bytes` over `ranks` devices: 2(n-1) steps each moving bytes/n over the
// link (reduce-scatter, then all-gather), and the reduce-scatter's additions. 0 for one rank.
double ring_allreduce_seconds(double bytes, int ranks, const Link& link);

// The devices of a data-parallel run: `hosts` machines of `per_host` devices each, `inside` the
// link between the devices of one machine, `between` each machine's network to the others (its
// whole rate, all its devices together).
struct Ring {
  int hosts = 1, per_host = 1;
  Link inside, between;
  int ranks() const { return hosts * per_host; }
  // The ring all-reduce of `bytes` over every device, as NCCL runs it across machines: one ring
  // per device of a machine (a channel) carrying 1/per_host of the bytes, each crossing from
  // machine to machine over its own 1/per_host of the network. Every one of the 2(n-1) steps so
  // moves bytes/n through each device's link and, the machine's devices together, through the
  // network: at the slower of the link's rate and the network's whole rate. A step that crosses
  // machines (2(hosts-1) of them) waits the network's latency, the others the link's (NCCL's own
  // tuning model). One machine: the ring over its link; one device per machine: the ring over the
  // network, as ring_allreduce_seconds.
  double allreduce_seconds(double bytes) const;
};

// The bus bandwidth of an all-reduce as nccl-tests reports it: bytes / seconds x 2(n-1)/n, the
// rate at which each rank's link moved data (comparable across rank counts).
double allreduce_bus_bandwidth(double bytes, int ranks, double seconds);
// A data-parallel run's bus bandwidth in GB/s: `bytes` summed per step over its communicate
// phase, where that phase is the whole sum (--reduce after-backward); NaN where backward hid part
// of it (overlap), where the sum is in the optimizer's pass (shared: the phase is the wait for the
// slowest rank), for one rank, or without a measured phase.
double communicate_bus_gbs(int64_t bytes, int ranks, double communicate_ms,
                           const std::string& reduce_mode);

struct DataParallelStep {
  int ranks = 1;
  double compute_s = 0;    // one device's forward, backward and optimizer on its slice
  double allreduce_s = 0;  // the gradients' all-reduce alone
  double exposed_s = 0;    // what backward does not hide of it
  double step_s = 0;       // compute + exposed
  // Throughput on `ranks` devices against `ranks` times one device's on the whole batch.
  double efficiency = 1;
};

// A data-parallel step from one device's step on the whole batch (`whole_batch_s`) and on its
// slice (`slice_s`). `overlapped` (PyTorch DDP, --reduce overlap): the all-reduce starts bucket by
// bucket as backward (two thirds of the compute) finishes layers, so what shows is what is left
// after backward, and at least the last bucket's (`bucket_bytes`) all-reduce. Else (crossover's
// after-backward, host-staged and nccl): all of it shows after backward.
DataParallelStep predict_data_parallel(double whole_batch_s, double slice_s, double gradient_bytes,
                                       int ranks, const Link& link, double bucket_bytes,
                                       bool overlapped);
// The same over the devices of several machines.
DataParallelStep predict_data_parallel(double whole_batch_s, double slice_s, double gradient_bytes,
                                       const Ring& ring, double bucket_bytes, bool overlapped);

}  // namespace xo
