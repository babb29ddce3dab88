// rsplit [MS]: about MS milliseconds of CPU time (default 1000) in Rust code
// whose names are mangled in its symbol table, split 2:1 between a method of a
// generic type (rsplit::grid::Grid<T>::sweep) and a free function
// (rsplit::churn), each measured with the thread CPU clock and printed as
// `truth NAME PERCENT` with NAME as the report's short names are. Built by
// t1400 with rustc when it is installed (it is no Debian package the project
// depends on).
use std::hint::black_box;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
}

fn cpu_ms() -> f64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // CLOCK_THREAD_CPUTIME_ID
    unsafe { clock_gettime(3, &mut ts) };
    ts.sec as f64 * 1e3 + ts.nsec as f64 / 1e6
}

#[inline(always)]
fn spin(mut x: u64, n: u64, salt: u64) -> u64 {
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(salt);
    }
    x
}

pub mod grid {
    pub struct Grid<T> {
        pub seed: T,
    }
    impl<T: Copy + Into<u64>> Grid<T> {
        #[inline(never)]
        pub fn sweep(&self, units: u64) -> u64 {
            super::spin(self.seed.into() | 1, units * 40000, 3)
        }
    }
}

#[inline(never)]
fn churn(units: u64) -> u64 {
    spin(0x9e3779b97f4a7c15, units * 40000, 7)
}

fn main() {
    let target: f64 = std::env::args().nth(1).map(|a| a.parse().expect("a number of milliseconds")).unwrap_or(1000.0);
    let g = grid::Grid { seed: 42u32 };
    let (mut tg, mut tc, mut sink) = (0.0, 0.0, 0u64);
    let start = cpu_ms();
    println!("pid {}", std::process::id());
    // sweep or churn, as likely each (xorshift, as workload.h's wl_pick: no
    // round for a sampling period to fall into step with)
    let mut rng = 0x853c49e6748fea9bu64;
    while cpu_ms() - start < target {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let t0 = cpu_ms();
        if (rng >> 32) % 2 == 0 {
            sink = sink.wrapping_add(black_box(&g).sweep(black_box(2)));
            tg += cpu_ms() - t0;
        } else {
            sink = sink.wrapping_add(churn(black_box(1)));
            tc += cpu_ms() - t0;
        }
    }
    black_box(sink);
    println!("truth rsplit::grid::Grid::sweep {:.2}", 100.0 * tg / (tg + tc));
    println!("truth rsplit::churn {:.2}", 100.0 * tc / (tg + tc));
}
