/* bench_graph.cuh - the one way the GPU benchmarks time a call: `calls`
 * launches f(0), f(1), ... (each may pick its own rotating weight or
 * routing) captured on stream s as one CUDA graph, the graph replayed
 * `reps` times; the median replay over `calls` is the time per call, in µs.
 * So no side pays for host launches, as the torch peers (torch.cuda.graph)
 * don't. Two uncaptured calls first: handles, kernel attributes, lazy
 * module loading. */
#ifndef BFP_BENCH_GRAPH_CUH
#define BFP_BENCH_GRAPH_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h" /* tests/ */

template <class F> static double graph_us(cudaStream_t s, F f, int calls = 20, int reps = 7)
{
    f(0);
    f(1 % calls);
    CU(cudaStreamSynchronize(s));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < calls; i++)
        f(i);
    CU(cudaStreamEndCapture(s, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphLaunch(ge, s)); /* the first replay uploads the graph */
    CU(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<double> t;
    for (int r = 0; r < reps; r++) {
        CU(cudaEventRecord(a, s));
        CU(cudaGraphLaunch(ge, s));
        CU(cudaEventRecord(b, s));
        CU(cudaEventSynchronize(b));
        float ms;
        CU(cudaEventElapsedTime(&ms, a, b));
        t.push_back(1000.0 * ms / calls);
    }
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

#endif
