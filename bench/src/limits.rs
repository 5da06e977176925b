//! Process limits and CPU affinity.

/// Raises the open-files soft limit to the hard limit; returns the new soft
/// limit. Async-signal-safe (used between fork and exec).
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    lim.rlim_cur
}

/// CPUs the calling thread may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; the call fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread (and the threads it starts later) to `cpus`.
pub fn pin(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The calling thread's scheduling priority raised (its nice value
/// lowered) until dropped; threads and processes it starts meanwhile
/// inherit the raised priority. Linux keeps a nice value per thread.
#[derive(Debug)]
pub struct Raised {
    before: libc::c_int,
    /// Dropped on the thread it was made on.
    _thread: std::marker::PhantomData<*const ()>,
}

impl Raised {
    /// Lowers the calling thread's nice value by `by`; `None` when the
    /// system refuses (raising needs `CAP_SYS_NICE`).
    pub fn by(by: libc::c_int) -> Option<Raised> {
        // SAFETY: plain system calls on the calling thread (who = 0).
        unsafe {
            *libc::__errno_location() = 0;
            let before = libc::getpriority(libc::PRIO_PROCESS, 0);
            if before == -1 && *libc::__errno_location() != 0 {
                return None;
            }
            (libc::setpriority(libc::PRIO_PROCESS, 0, before - by) == 0).then_some(Raised {
                before,
                _thread: std::marker::PhantomData,
            })
        }
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        // SAFETY: plain system call on the calling thread.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, self.before) };
    }
}
