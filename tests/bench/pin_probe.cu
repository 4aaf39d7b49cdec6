// pin_probe.cu - what pinned host memory costs to get, and what the
// host-to-device copy gives from pinned and from pageable memory: 64
// buffers of 16 MiB (the loader's chunk buffers) from cudaHostAlloc, and
// from mmap + touching the pages on 8 threads + cudaHostRegister (what
// lib/loader/device_cuda.c does); one 1 GiB allocation each way.
//   pin_probe
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 64
#define SZ (16u<<20)
static void *bufs[N];
static void *toucher(void *a){long i=(long)a; for(int k=i;k<N;k+=8) memset(bufs[k],1,SZ); return NULL;}
int main(){
  cudaFree(0);
  void *d; cudaMalloc(&d, SZ);
  double t=now();
  for(int i=0;i<N;i++) cudaHostAlloc(&bufs[i], SZ, cudaHostAllocPortable);
  double a=now()-t; printf("cudaHostAlloc %d x 16MiB: %.3f s (%.2f GB/s)\n",N,a,N*(double)SZ/a/1e9);
  t=now(); for(int r=0;r<4;r++) for(int i=0;i<N;i++) cudaMemcpy(d,bufs[i],SZ,cudaMemcpyHostToDevice);
  a=now()-t; printf("pinned H2D: %.2f GB/s\n",4*N*(double)SZ/a/1e9);
  for(int i=0;i<N;i++) cudaFreeHost(bufs[i]);
  t=now();
  for(int i=0;i<N;i++) bufs[i]=mmap(NULL,SZ,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  pthread_t th[8]; for(long i=0;i<8;i++) pthread_create(&th[i],0,toucher,(void*)i); for(int i=0;i<8;i++) pthread_join(th[i],0);
  double b=now()-t;
  t=now(); for(int i=0;i<N;i++) cudaHostRegister(bufs[i],SZ,cudaHostRegisterPortable);
  a=now()-t; printf("mmap+touch (8 threads) %.3f s, then cudaHostRegister %.3f s (%.2f GB/s)\n",b,a,N*(double)SZ/a/1e9);
  for(int i=0;i<N;i++) cudaHostUnregister(bufs[i]);
  t=now(); for(int r=0;r<4;r++) for(int i=0;i<N;i++) cudaMemcpy(d,bufs[i],SZ,cudaMemcpyHostToDevice);
  a=now()-t; printf("pageable H2D (touched): %.2f GB/s\n",4*N*(double)SZ/a/1e9);
  // one big registration
  void *big=mmap(NULL,(size_t)N*SZ,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);
  t=now(); cudaHostRegister(big,(size_t)N*SZ,cudaHostRegisterPortable); a=now()-t;
  printf("one cudaHostRegister of 1 GiB populated: %.3f s\n",a);
  t=now(); void *h; cudaHostAlloc(&h,(size_t)N*SZ,cudaHostAllocPortable); a=now()-t;
  printf("one cudaHostAlloc of 1 GiB: %.3f s\n",a);
  return 0;
}
