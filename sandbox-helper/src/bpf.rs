//! The seccomp program generator: turns the rule table of [`crate::syscall_rules`] into classic
//! BPF, shaped for what the kernel does when a filter is installed.
//!
//! At installation the kernel JIT-compiles the program and, for every system-call number,
//! emulates it with only the number and architecture known, to cache the calls that are always
//! allowed (`seccomp_cache_prepare`). Both costs grow with the program and are paid before
//! every command, so the program is laid out as:
//!
//! 1. the architecture check (anything else is killed) and, on x86_64, EPERM for x32 calls;
//! 2. a binary search over the numbers that have rules, each leaf jumping straight to its own
//!    block and everything else to `ALLOW` (so the emulation of an unfiltered call takes a
//!    dozen steps and caches it, and a filtered one reaches its block in as many);
//! 3. one block per filtered call: its rules in table order, each a run of argument checks
//!    that falls through to `return ERRNO(e)` when all hold and otherwise skips to the next
//!    rule, ending in `return ALLOW`.
//!
//! Conditional jumps in classic BPF reach at most 255 instructions ahead, so everything that can
//! be far (a block, the `ALLOW` return) is reached through `JA`, whose offset is 32 bits; the
//! short jumps stay inside one rule.
//!
//! ```
//! use cordon_sandbox::bpf::{compile, AUDIT_ARCH};
//! use cordon_sandbox::syscall_rules::{Arg, SyscallRule};
//!
//! let rules = [SyscallRule {
//!     syscall: "socket",
//!     nr: libc::SYS_socket,
//!     when: vec![Arg::Ne32(0, libc::AF_UNIX as u64)],
//!     errno: libc::EPERM,
//!     reason: "an example",
//! }];
//! let program = compile(&rules).unwrap();
//! assert!(program.len() < 20);
//! # let _ = AUDIT_ARCH;
//! ```

pub use seccompiler::sock_filter;
use seccompiler::BpfProgram;

use crate::error::SetupError;
use crate::syscall_rules::{Arg, SyscallRule};

/// The audit architecture of the native system-call ABI.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xc000_003e;
/// The audit architecture of the native system-call ABI.
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xc000_00b7;
/// The audit architecture of the native system-call ABI.
#[cfg(target_arch = "riscv64")]
pub const AUDIT_ARCH: u32 = 0xc000_00f3;

/// x32 system calls carry this bit in their number and the native audit architecture.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// `struct seccomp_data.args` starts here; each argument is 64 bits, low word first on the
/// little-endian architectures this helper supports.
const ARGS_OFFSET: u32 = 16;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Search leaves hold at most this many numbers before the tree splits again.
const LEAF: usize = 4;

/// Compiles `rules` into one program (see the module docs). For each call the first rule whose
/// conditions all hold decides its errno; a call no rule matches is allowed.
pub fn compile(rules: &[SyscallRule]) -> Result<BpfProgram, SetupError> {
    let answered: Vec<(&SyscallRule, u32)> =
        rules.iter().map(|r| (r, errno_return(r.errno))).collect();
    compile_answers(&answered)
}

/// The program of observer mode: the refusals of `rules` that return `EPERM` go to the
/// observer (`SECCOMP_RET_USER_NOTIF`), which answers them with that errno (and, should it be
/// gone, the kernel fails them with `ENOSYS`: a refusal never turns into an allowed call);
/// other refusals stay in the kernel; then every call of `watched` that no refusal took is
/// reported to the observer too, which lets it continue. The observer tells the two apart by
/// running the program [`compile`] makes of `rules` (see [`evaluate`]).
pub fn compile_observed(
    rules: &[SyscallRule],
    watched: &[SyscallRule],
) -> Result<BpfProgram, SetupError> {
    let refusals = rules.iter().map(|r| {
        let answer = if r.errno == libc::EPERM {
            libc::SECCOMP_RET_USER_NOTIF
        } else {
            errno_return(r.errno)
        };
        (r, answer)
    });
    let watches = watched.iter().map(|r| (r, libc::SECCOMP_RET_USER_NOTIF));
    let answered: Vec<(&SyscallRule, u32)> = refusals.chain(watches).collect();
    compile_answers(&answered)
}

/// The layout of the module docs over rules that each carry their filter return value.
fn compile_answers(rules: &[(&SyscallRule, u32)]) -> Result<BpfProgram, SetupError> {
    let mut calls: Vec<Call> = Vec::new();
    for (r, _) in rules {
        let nr = nr32(r.nr)?;
        if !calls.iter().any(|c| c.nr == nr) {
            // The first rule decides when it has no condition: the answer is a constant, which
            // the search answers itself instead of jumping to a block.
            let first = rules.iter().find(|x| x.0.nr == r.nr);
            let constant = first.and_then(|(f, answer)| f.when.is_empty().then_some(*answer));
            calls.push(Call { nr, constant });
        }
    }
    calls.sort_unstable_by_key(|c| c.nr);

    let mut head = Code::default();
    head.load(ARCH_OFFSET);
    head.short(JEQ_K, AUDIT_ARCH, 1, 0);
    head.ret(libc::SECCOMP_RET_KILL_PROCESS);
    head.load(NR_OFFSET);
    #[cfg(target_arch = "x86_64")]
    {
        head.short(JGE_K, X32_SYSCALL_BIT, 0, 1);
        head.ret(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
    }
    search(&mut head, &calls, 0)?;
    let allow_at = head.code.len();
    head.ret(libc::SECCOMP_RET_ALLOW);

    let mut program = head.code;
    let mut block_at = vec![0; calls.len()];
    for (i, call) in calls.iter().enumerate() {
        if call.constant.is_some() {
            continue;
        }
        block_at[i] = program.len();
        let mine = rules.iter().filter(|r| nr32(r.0.nr).ok() == Some(call.nr));
        program.extend(block(mine)?);
    }
    // Resolve the long jumps of the search now that every block has its place.
    for (at, target) in head.far {
        let to = match target {
            Far::Allow => allow_at,
            Far::Block(i) => block_at[i],
        };
        program[at].k = u32::try_from(to - at - 1)
            .map_err(|_| compile_error("program too long for a jump".into()))?;
    }
    if program.len() > usize::from(libc::BPF_MAXINSNS as u16) {
        return Err(compile_error(format!(
            "{} instructions, more than the kernel's {}",
            program.len(),
            libc::BPF_MAXINSNS
        )));
    }
    Ok(program)
}

/// A call that has rules, and its answer when that does not depend on the arguments.
#[derive(Debug, Clone, Copy)]
struct Call {
    nr: u32,
    /// The filter return value when it does not depend on the arguments.
    constant: Option<u32>,
}

/// A jump whose target is known only once the program is laid out.
#[derive(Debug, Clone, Copy)]
enum Far {
    Allow,
    /// The block of the i-th call in sorted order.
    Block(usize),
}

#[derive(Default)]
struct Code {
    code: Vec<sock_filter>,
    far: Vec<(usize, Far)>,
}

impl Code {
    fn push(&mut self, code: u16, k: u32, jt: u8, jf: u8) {
        self.code.push(sock_filter { code, jt, jf, k });
    }
    fn load(&mut self, offset: u32) {
        self.push(LD_W_ABS, offset, 0, 0);
    }
    fn short(&mut self, code: u16, k: u32, jt: u8, jf: u8) {
        self.push(code, k, jt, jf);
    }
    fn ret(&mut self, k: u32) {
        self.push(RET_K, k, 0, 0);
    }
    fn jump(&mut self, to: Far) {
        self.far.push((self.code.len(), to));
        self.push(JA, 0, 0, 0);
    }
}

fn errno_return(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

/// The instructions [`search`] emits for `calls`, so that a node knows whether its left half
/// fits a short jump.
fn search_len(calls: &[Call]) -> usize {
    if calls.len() <= LEAF {
        let mut errnos: Vec<u32> = calls.iter().filter_map(|c| c.constant).collect();
        errnos.sort_unstable();
        errnos.dedup();
        let jumps: usize = calls
            .iter()
            .map(|c| if c.constant.is_some() { 1 } else { 2 })
            .sum();
        return jumps + 1 + errnos.len();
    }
    let mid = calls.len() / 2;
    let left = search_len(&calls[..mid]);
    let node = if left <= usize::from(u8::MAX) { 1 } else { 2 };
    node + left + search_len(&calls[mid..])
}

/// Sends each call in `calls` (the `base`-th onwards of the sorted list) to its answer or its
/// block, and everything else to `ALLOW`.
fn search(code: &mut Code, calls: &[Call], base: usize) -> Result<(), SetupError> {
    if calls.len() <= LEAF {
        // A leaf: constant answers jump to returns placed right after it.
        let mut pending: Vec<(usize, u32)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            match call.constant {
                Some(errno) => {
                    pending.push((code.code.len(), errno));
                    code.short(JEQ_K, call.nr, 0, 0);
                }
                None => {
                    code.short(JEQ_K, call.nr, 0, 1);
                    code.jump(Far::Block(base + i));
                }
            }
        }
        code.jump(Far::Allow);
        let mut placed: Vec<(u32, usize)> = Vec::new();
        for &(at, errno) in &pending {
            let ret_at = match placed.iter().find(|(e, _)| *e == errno) {
                Some(&(_, ret_at)) => ret_at,
                None => {
                    let ret_at = code.code.len();
                    code.ret(errno);
                    placed.push((errno, ret_at));
                    ret_at
                }
            };
            code.code[at].jt = u8::try_from(ret_at - at - 1)
                .map_err(|_| compile_error("search leaf too long".into()))?;
        }
        return Ok(());
    }
    let mid = calls.len() / 2;
    let left = search_len(&calls[..mid]);
    // `nr >= calls[mid].nr`: skip the left half, with a long jump when it is too far.
    match u8::try_from(left) {
        Ok(over) => code.short(JGE_K, calls[mid].nr, over, 0),
        Err(_) => {
            code.short(JGE_K, calls[mid].nr, 0, 1);
            let at = code.code.len();
            // Patched below to land on the right half (an offset within the head).
            code.push(JA, 0, 0, 0);
            let start = code.code.len();
            search(code, &calls[..mid], base)?;
            code.code[at].k = u32::try_from(code.code.len() - start)
                .map_err(|_| compile_error("program too long for a jump".into()))?;
            return search(code, &calls[mid..], base + mid);
        }
    }
    let start = code.code.len();
    search(code, &calls[..mid], base)?;
    if code.code.len() - start != left {
        return Err(compile_error("search layout miscounted".into()));
    }
    search(code, &calls[mid..], base + mid)
}

/// One call's rules in order, then `return ALLOW`.
fn block<'a, 'r: 'a>(
    rules: impl Iterator<Item = &'a (&'r SyscallRule, u32)>,
) -> Result<Vec<sock_filter>, SetupError> {
    let mut out = Vec::new();
    for &(rule, answer) in rules {
        let checks = checks(&rule.when);
        // Every failing check skips to the instruction after this rule's return.
        let end = checks.len() + 1;
        for (i, check) in checks.iter().enumerate() {
            let skip = |to_end: bool| -> Result<u8, SetupError> {
                if to_end {
                    u8::try_from(end - i - 1).map_err(|_| {
                        compile_error(format!("{}: too many argument conditions", rule.syscall))
                    })
                } else {
                    Ok(0)
                }
            };
            let insn = match *check {
                Check::Load(offset) => sock_filter {
                    code: LD_W_ABS,
                    jt: 0,
                    jf: 0,
                    k: offset,
                },
                Check::And(mask) => sock_filter {
                    code: AND_K,
                    jt: 0,
                    jf: 0,
                    k: mask,
                },
                Check::FailUnlessEq(k) => sock_filter {
                    code: JEQ_K,
                    jt: 0,
                    jf: skip(true)?,
                    k,
                },
                Check::FailIfEq(k) => sock_filter {
                    code: JEQ_K,
                    jt: skip(true)?,
                    jf: 0,
                    k,
                },
                Check::FailUnlessAny(k) => sock_filter {
                    code: JSET_K,
                    jt: 0,
                    jf: skip(true)?,
                    k,
                },
                Check::PassUnlessEq(k, over) => sock_filter {
                    code: JEQ_K,
                    jt: 0,
                    jf: over,
                    k,
                },
            };
            out.push(insn);
        }
        out.push(sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: answer,
        });
    }
    out.push(sock_filter {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    });
    Ok(out)
}

/// One instruction of a rule's argument checks.
#[derive(Debug, Clone, Copy)]
enum Check {
    Load(u32),
    And(u32),
    /// The condition fails (skip to the next rule) unless the accumulator equals k.
    FailUnlessEq(u32),
    /// The condition fails if the accumulator equals k.
    FailIfEq(u32),
    /// The condition fails unless the accumulator has one of k's bits.
    FailUnlessAny(u32),
    /// The condition holds (jump `over` instructions ahead) unless the accumulator equals k.
    PassUnlessEq(u32, u8),
}

/// A condition that cannot hold (a masked comparison with bits outside its mask).
const NEVER: [Check; 3] = [
    Check::Load(NR_OFFSET),
    Check::And(0),
    Check::FailUnlessEq(1),
];

fn checks(when: &[Arg]) -> Vec<Check> {
    let low = |i: u8| ARGS_OFFSET + 8 * u32::from(i);
    let high = |i: u8| low(i) + 4;
    let mut out = Vec::new();
    for &arg in when {
        match arg {
            Arg::Eq32(i, v) => out.extend([Check::Load(low(i)), Check::FailUnlessEq(v as u32)]),
            Arg::Ne32(i, v) => out.extend([Check::Load(low(i)), Check::FailIfEq(v as u32)]),
            Arg::Masked32(_, m, v) if v & !m & 0xffff_ffff != 0 || v > 0xffff_ffff => {
                out.extend(NEVER)
            }
            Arg::Masked64(_, m, v) if v & !m != 0 => out.extend(NEVER),
            Arg::Masked32(i, m, v) => out.extend([
                Check::Load(low(i)),
                Check::And(m as u32),
                Check::FailUnlessEq((v & m) as u32),
            ]),
            Arg::Masked64(i, m, v) => {
                let (mh, ml) = ((m >> 32) as u32, m as u32);
                if mh != 0 {
                    out.extend([
                        Check::Load(high(i)),
                        Check::And(mh),
                        Check::FailUnlessEq(((v >> 32) as u32) & mh),
                    ]);
                }
                out.extend([
                    Check::Load(low(i)),
                    Check::And(ml),
                    Check::FailUnlessEq((v as u32) & ml),
                ]);
            }
            Arg::AnyBits32(i, m) => {
                out.extend([Check::Load(low(i)), Check::FailUnlessAny(m as u32)])
            }
            // Non-zero if the low word is (jump over the high-word check), else if the high is.
            Arg::NonZero64(i) => out.extend([
                Check::Load(low(i)),
                Check::PassUnlessEq(0, 2),
                Check::Load(high(i)),
                Check::FailIfEq(0),
            ]),
        }
    }
    out
}

fn nr32(nr: i64) -> Result<u32, SetupError> {
    u32::try_from(nr).map_err(|_| compile_error(format!("system call number {nr} out of range")))
}

fn compile_error(message: String) -> SetupError {
    SetupError::Seccomp {
        what: "compile",
        message,
        errno: None,
    }
}

/// Runs `program` (one this module compiled) over a system call as seccomp would, and returns
/// the filter's answer. The observer uses it to tell a call that the kernel filter refuses (to
/// be answered with that errno) from one that is only watched: it runs exactly the program the
/// helper built, so the two can never disagree. Anything outside the instructions this module
/// emits, or a jump out of the program, answers `KILL_PROCESS`, which the observer treats as a
/// refusal.
pub fn evaluate(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        let at = ARGS_OFFSET as usize + 8 * i;
        data[at..at + 8].copy_from_slice(&a.to_ne_bytes());
    }
    let (mut acc, mut pc) = (0u32, 0usize);
    // Every jump goes forward, so the program ends within its length; the bound only guards
    // against a malformed program.
    for _ in 0..=program.len() {
        let Some(insn) = program.get(pc) else {
            break;
        };
        pc += 1;
        match insn.code {
            LD_W_ABS => {
                let at = insn.k as usize;
                match data
                    .get(at..at + 4)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                {
                    Some(word) => acc = u32::from_ne_bytes(word),
                    None => break,
                }
            }
            AND_K => acc &= insn.k,
            JA => pc += insn.k as usize,
            JEQ_K | JGE_K | JSET_K => {
                let taken = match insn.code {
                    JEQ_K => acc == insn.k,
                    JGE_K => acc >= insn.k,
                    _ => acc & insn.k != 0,
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            RET_K => return insn.k,
            _ => break,
        }
    }
    libc::SECCOMP_RET_KILL_PROCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscall_rules::{rules, Arg};

    fn rule(nr: i64, when: Vec<Arg>, errno: i32) -> SyscallRule {
        SyscallRule {
            syscall: "test",
            nr,
            when,
            errno,
            reason: "test",
        }
    }

    #[test]
    fn observed_program_notifies_eperm_refusals_and_watches_keeps_other_errnos() {
        let refused = [
            rule(libc::SYS_ptrace, vec![], libc::EPERM),
            rule(libc::SYS_clone3, vec![], libc::ENOSYS),
            rule(libc::SYS_socket, vec![Arg::Ne32(0, 1)], libc::EPERM),
        ];
        let watched = [
            rule(libc::SYS_openat, vec![Arg::AnyBits32(2, 3)], 0),
            rule(libc::SYS_socket, vec![], 0),
        ];
        let observed = compile_observed(&refused, &watched).unwrap();
        let plain = compile(&refused).unwrap();
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let nr = |n: i64| n as u32;
        let run = |p: &[sock_filter], n: i64, args: [u64; 6]| evaluate(p, AUDIT_ARCH, nr(n), args);
        assert_eq!(run(&observed, libc::SYS_ptrace, [0; 6]), notify);
        assert_eq!(
            run(&observed, libc::SYS_clone3, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(run(&observed, libc::SYS_openat, [0, 0, 1, 0, 0, 0]), notify);
        assert_eq!(
            run(&observed, libc::SYS_openat, [0; 6]),
            libc::SECCOMP_RET_ALLOW
        );
        // socket(AF_UNIX) is watched, socket(AF_INET) refused: both notify, and the plain
        // program tells them apart.
        assert_eq!(run(&observed, libc::SYS_socket, [1, 0, 0, 0, 0, 0]), notify);
        assert_eq!(run(&observed, libc::SYS_socket, [2, 0, 0, 0, 0, 0]), notify);
        assert_eq!(
            run(&plain, libc::SYS_socket, [1, 0, 0, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&plain, libc::SYS_socket, [2, 0, 0, 0, 0, 0]),
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32
        );
        assert_eq!(
            evaluate(&plain, 0x4000_0003, 0, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn evaluate_agrees_with_compile_on_the_real_table() {
        let policy = crate::policy::SandboxPolicy::from_json(
            r#"{"version":1,"filesystem":{},"network":{"mode":"denied"},
               "enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#,
        )
        .unwrap();
        let table = rules(&policy);
        let program = compile(&table).unwrap();
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        assert_eq!(
            evaluate(&program, AUDIT_ARCH, libc::SYS_ptrace as u32, [0; 6]),
            eperm
        );
        assert_eq!(
            evaluate(&program, AUDIT_ARCH, libc::SYS_getpid as u32, [0; 6]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            evaluate(&[], AUDIT_ARCH, 0, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }
}
