/* Link-time stand-in for glibc 2.17's libpthread.so.0: each function the
 * plugin (and libstdc++.a's std::thread, call_once, thread-locals) calls,
 * at the version it had there (libpthread_stub.lds). Never loaded: the
 * plugin records "pthread_create@GLIBC_2.2.5 from libpthread.so.0", which
 * glibc 2.17 to 2.33 find in libpthread.so.0 and glibc 2.34 and later in
 * libc.so.6, where the old versions stay. Without it the linker would take
 * glibc 2.36's default versions (pthread_create@GLIBC_2.34). The bodies are
 * never run. */
#define STUB(name) \
  void name(void);   \
  void name(void) {}
STUB(pthread_create)
STUB(pthread_join)
STUB(pthread_detach)
STUB(pthread_once)
STUB(pthread_key_create)
STUB(__pthread_key_create)
STUB(pthread_key_delete)
STUB(pthread_getspecific)
STUB(pthread_setspecific)
STUB(pthread_sigmask)
STUB(pthread_mutex_lock)
STUB(pthread_mutex_unlock)
STUB(pthread_condattr_init)
STUB(pthread_condattr_destroy)
STUB(pthread_condattr_setclock)
STUB(pthread_cond_init)
STUB(pthread_cond_destroy)
STUB(pthread_cond_wait)
STUB(pthread_cond_timedwait)
STUB(pthread_cond_signal)
STUB(pthread_cond_broadcast)
