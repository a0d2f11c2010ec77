// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html),
// checked by -Wthread-safety in clang builds and no-ops on other compilers. What a mutex guards
// is declared on the fields (SLUICE_GUARDED_BY), what a function needs held on the function
// (SLUICE_REQUIRES), so the compiler, not a comment, says when a field is touched without its lock.
// Used with base::Mutex and base::MutexLock (base/mutex.h), base::AdaptiveMutex and its lock
// (base/adaptive_mutex.h).
#pragma once

#if defined(__clang__)
#define SLUICE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SLUICE_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (base::Mutex).
#define SLUICE_CAPABILITY(x) SLUICE_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its scope (base::MutexLock).
#define SLUICE_SCOPED_CAPABILITY SLUICE_THREAD_ANNOTATION(scoped_lockable)
// A field read or written only with `x` held.
#define SLUICE_GUARDED_BY(x) SLUICE_THREAD_ANNOTATION(guarded_by(x))
// A pointer whose pointee is read or written only with `x` held.
#define SLUICE_PT_GUARDED_BY(x) SLUICE_THREAD_ANNOTATION(pt_guarded_by(x))
// A function called only with these held.
#define SLUICE_REQUIRES(...) SLUICE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called only with these not held (it takes them).
#define SLUICE_EXCLUDES(...) SLUICE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that takes, or gives up, these (the object itself when empty).
#define SLUICE_ACQUIRE(...) SLUICE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define SLUICE_RELEASE(...) SLUICE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function that returns a reference to the lock `x` (base::Mutex::native).
#define SLUICE_RETURN_CAPABILITY(x) SLUICE_THREAD_ANNOTATION(lock_returned(x))
// A function the analysis does not check; say why next to it.
#define SLUICE_NO_THREAD_SAFETY_ANALYSIS SLUICE_THREAD_ANNOTATION(no_thread_safety_analysis)
