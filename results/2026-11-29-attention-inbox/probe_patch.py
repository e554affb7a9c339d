p='kernels/cuda/attention_decode.cu'
s=open(p).read()
def rep(old,new,count=1):
    global s
    assert s.count(old)==count, (old, s.count(old))
    s=s.replace(old,new)
rep('#include "kernels/cuda/launch.cuh"\n','#include "kernels/cuda/launch.cuh"\n#include "kernels/cuda/phase_probe.cuh"\n')
rep('''  __shared__ MergeInbox<D, G> inbox;
''','''  __shared__ MergeInbox<D, G> inbox;
  phase_probe::Stamps stamps;
  stamps.mark<0>();
''')
rep('''  const int64_t slot = fused ? args.rope.slot_mapping[token] : -1;
  pdl_wait();
  pdl_launch_dependents();
  if (args.probe == 1) return;''','''  const int64_t slot = fused ? args.rope.slot_mapping[token] : -1;
  stamps.mark<1>();
  pdl_wait();
  pdl_launch_dependents();
  stamps.mark<2>();
  if (args.probe == 1) return;''')
rep('''  __syncthreads();
  uint32_t qa[D / 16][2] = {};''','''  __syncthreads();
  stamps.mark<3>();
  uint32_t qa[D / 16][2] = {};''')
rep('''  // The warp's state into slot `warp`: l summed over the row's 4 lanes; heads past `heads` unused.
  l += __shfl_xor_sync''','''  stamps.mark<4>();
  // The warp's state into slot `warp`: l summed over the row's 4 lanes; heads past `heads` unused.
  l += __shfl_xor_sync''')
rep('''  __syncthreads();
  if (args.probe == 2) return;''','''  __syncthreads();
  stamps.mark<5>();
  if (args.probe == 2) return;''')
rep('''  // The new key, a source of its own''','''  stamps.mark<6>();
  // The new key, a source of its own''')
rep('''  wait_inbox(inbox);
''','''  stamps.mark<7>();
  wait_inbox(inbox);
  stamps.mark<8>();
''')
rep('''      from_float<T>(total != 0.0f ? out / total : 0.0f);
}
''','''      from_float<T>(total != 0.0f ? out / total : 0.0f);
  stamps.mark<9>();
  stamps.commit<10>(1000 + D + 10 * G + (split == kClusterSplits - 1 ? 1 : 0));
}
''')
rep('''void launch_cluster_decode_attention(const AttentionArgs& args, cudaStream_t stream) {
''','''void launch_cluster_decode_attention(const AttentionArgs& args, cudaStream_t stream) {
  static const bool registered = [] {
    if (phase_probe::probe_on()) std::atexit([] { phase_probe::dump_probe("attention"); });
    return true;
  }();
  (void)registered;
''')
open(p,'w').write(s)
s=open(p).read()
old='''  if (rotate) rope_angles<D>(args, token, col, sines, cosines);
  const int64_t slot = fused ? args.rope.slot_mapping[token] : -1;
  stamps.mark<1>();'''
new='''  if (rotate && args.probe != 3) rope_angles<D>(args, token, col, sines, cosines);
  if (args.probe == 3) {
    for (int e = 0; e < 8; ++e) { sines[e] = 0.0f; cosines[e] = 1.0f; }
  }
  const int64_t slot = fused ? args.rope.slot_mapping[token] : -1;
  stamps.mark<1>();'''
assert s.count(old)==1
s=s.replace(old,new)
open(p,'w').write(s)
