/* Link-time stand-in for glibc 2.17's libdl.so.2 (libpthread_stub.c says
 * why): dlopen, dlsym and dlclose at GLIBC_2.2.5, which glibc 2.34 and later
 * keep in libc.so.6 beside their new GLIBC_2.34 versions. Never loaded. */
#define STUB(name) \
  void name(void);   \
  void name(void) {}
STUB(dlopen)
STUB(dlsym)
STUB(dlclose)
STUB(dlerror)
