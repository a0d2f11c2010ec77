// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html),
// checked by -Wthread-safety in clang builds and no-ops on other compilers. What a mutex guards
// is declared on the fields (GUARDED_BY), what a function needs held on the function (REQUIRES),
// so the compiler, not a comment, says when a field is touched without its lock. Used with
// core::Mutex and core::MutexLock (core/mutex.h), core::AdaptiveMutex and its lock
// (core/adaptive_mutex.h).
#pragma once

#if defined(__clang__)
#define SLUICE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SLUICE_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (core::Mutex).
#define CAPABILITY(x) SLUICE_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its scope (core::MutexLock).
#define SCOPED_CAPABILITY SLUICE_THREAD_ANNOTATION(scoped_lockable)
// A field read or written only with `x` held.
#define GUARDED_BY(x) SLUICE_THREAD_ANNOTATION(guarded_by(x))
// A pointer whose pointee is read or written only with `x` held.
#define PT_GUARDED_BY(x) SLUICE_THREAD_ANNOTATION(pt_guarded_by(x))
// A function called only with these held.
#define REQUIRES(...) SLUICE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called only with these not held (it takes them).
#define EXCLUDES(...) SLUICE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that takes, or gives up, these (the object itself when empty).
#define ACQUIRE(...) SLUICE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SLUICE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function that returns a reference to the lock `x` (core::Mutex::native).
#define RETURN_CAPABILITY(x) SLUICE_THREAD_ANNOTATION(lock_returned(x))
// A function the analysis does not check; say why next to it.
#define NO_THREAD_SAFETY_ANALYSIS SLUICE_THREAD_ANNOTATION(no_thread_safety_analysis)
