// The engine interface. The daemon talks to every engine
// through this and nothing else; optional abilities are reported as
// capabilities, never guessed from the engine's name.
import type { EngineName, SleepKeeps } from "@hutch/shared";

export interface BoxHandle {
  id: string;
  name: string;
  /** $HUTCH_HOME/boxes/<id> */
  dir: string;
  /** Engine settings chosen at create (e.g. cpus, memory, image for VMs). */
  config: Record<string, unknown>;
}

export interface EngineCapabilities {
  isolation: "namespace" | "vm";
  pause: boolean;
  memorySnapshot: boolean;
  screenshot: boolean;
  /**
   * Agent CLIs reach the box when it boots (the VM's agent disks): one
   * installed on the host while the box runs is there only after a restart.
   * False where the host's agents directory is shared live (a bind mount).
   */
  agentsAtBoot: boolean;
  /**
   * What `sleep` keeps: "memory", the box's programs carry on after a wake
   * (a VM's RAM and devices saved to a file); "disk", its programs end and
   * its files stay. Null: the engine cannot sleep a box.
   */
  sleep: SleepKeeps | null;
}

/** A box's sleeping state on the host. */
export interface SleepState {
  keeps: SleepKeeps;
  /** Bytes it takes on the host's disk. */
  bytes: number;
}

export interface ProbeResult {
  ok: boolean;
  engine: EngineName;
  detail: string;
  /** What to run to fix it, when not ok. */
  fix?: string;
}

/** One resource limit as this host can (or cannot) enforce it, for `hutch doctor`. */
export interface LimitReport {
  name: string;
  enforced: boolean;
  detail: string;
  fix?: string;
}

/** One accelerator tried by booting a guest with it, for `hutch doctor`. */
export interface AcceleratorProbe {
  accel: string;
  ok: boolean;
  detail: string;
}

export interface Observed {
  running: boolean;
  /** Running but frozen (engines with the pause capability). */
  paused?: boolean;
  pid?: number;
}

/** Where the box's agent channel can be reached. */
export interface ChannelEndpoint {
  kind: "unix";
  path: string;
  /** The stream outlives connections (a VM's serial port), so a new one may start with old bytes. */
  leftovers?: boolean;
  /**
   * The host pid of the process that must be listening (the box's PID 1),
   * checked with SO_PEERCRED before a byte is sent; a socket that can be
   * reached from inside the box names it. 0: the engine could not tell,
   * and every peer is refused.
   */
  peerPid?: number;
}

/** What a start says of booted states (qemu/booted.ts): loaded one, or booted and one of its shape is wanted. */
export interface StartedFrom {
  booted: "loaded" | "wanted" | null;
}

export interface Engine {
  readonly name: EngineName;
  readonly capabilities: EngineCapabilities;
  /** Can this host run boxes on this engine? Cheap checks only; doctor boots a real box. */
  probe(): Promise<ProbeResult>;
  /** Prepares the box's files. Idempotent. */
  create(box: BoxHandle): Promise<void>;
  /**
   * Starts the box; returns once it is booting (the channel may not answer
   * yet). An engine that keeps booted states (qemu/booted.ts) says whether
   * this start loaded one, and when it booted instead whether one of this
   * box's shape is wanted (the box service has one made: box/pool.ts).
   */
  start(box: BoxHandle): Promise<StartedFrom | undefined>;
  /** Graceful stop through `requestShutdown`, then forced after timeoutMs. */
  stop(box: BoxHandle, timeoutMs: number, requestShutdown: () => void): Promise<{ forced: boolean }>;
  /**
   * Kills the box's processes. `own`: only those this home started (its
   * pidfile's), not every process of the host that carries the box's id: a
   * superseded copy is removed while another server (on the same host, in
   * tests) may run the box under the same id.
   */
  kill(box: BoxHandle, opts?: { own?: boolean }): Promise<void>;
  /** Freezes and thaws the box; present when capabilities.pause is true. */
  pause?(box: BoxHandle): Promise<void>;
  resume?(box: BoxHandle): Promise<void>;
  /**
   * Puts a running box to sleep: its state durable on disk first, then no
   * process of it left. Returns once both hold. Idempotent, and safe to call
   * again after a crash part-way: a half-written state is never the one a
   * wake finds. Present when capabilities.sleep is set.
   */
  sleep?(box: BoxHandle): Promise<SleepState>;
  /**
   * Starts an asleep box from its sleeping state; returns once it is running
   * (the channel may not answer yet), with `cold` saying why it booted
   * afresh from its disk instead (the state was torn or missing). Also
   * finishes a wake a crash interrupted. The state is gone once it returns.
   */
  wake?(box: BoxHandle): Promise<{ cold: string | null }>;
  /** The box's sleeping state, if it has one (whether or not it is usable). */
  sleeping?(box: BoxHandle): SleepState | null;
  /** What a sleep keeps on this host and why, for `hutch doctor` (present with capabilities.sleep). */
  sleepDetail?(): Promise<string>;
  /** Throws a stopped box's sleeping state away (a stop asked of an asleep box). Idempotent. */
  forgetSleep?(box: BoxHandle): Promise<void>;
  /**
   * Moves an asleep box's files to another box's handle (a warm pool's box,
   * claimed under the new box's id and name): from then on `to` wakes as
   * `from` would have, and nothing of `from` is left. The box must not be
   * running, and `to` must have no files yet. Not idempotent: the caller
   * records the move's outcome.
   */
  rehome?(from: BoxHandle, to: BoxHandle): Promise<void>;
  /**
   * Keeps an asleep box's state and disk as the booted state of its shape
   * (present where start may say `wanted`): the box is left without them, to
   * be destroyed. False when it could not be kept or one was there already.
   */
  keepBooted?(box: BoxHandle): Promise<boolean>;
  inspect(box: BoxHandle): Promise<Observed>;
  channel(box: BoxHandle): ChannelEndpoint;
  /** Removes every file of the box. The box must not be running. */
  /** Removes the box's files and what it holds on the host; `own`: not what the host's other copies of the box id share (its cgroups). */
  destroy(box: BoxHandle, opts?: { own?: boolean }): Promise<void>;
  /** Lists what of the box is left: files, processes. Empty means fully gone. */
  leftovers(box: BoxHandle): Promise<string[]>;
  /** Tail of the box's console log, for error messages. */
  consoleTail(box: BoxHandle, lines?: number): Promise<string>;
  /** How long a started box's guest may take to answer the hello. */
  helloTimeoutMs(box: BoxHandle): Promise<number>;
  /**
   * A stopped box's writable roots (/workspace, the home), readable on the
   * host, for a snapshot taken from the disk; `release` undoes whatever that
   * took (a mount). Absent when the engine cannot (a VM's roots are inside
   * its qcow2: its snapshots go through the guest). The caller keeps the box
   * stopped until it releases.
   */
  openRoots?(box: BoxHandle): Promise<{ roots: { name: "workspace" | "home"; path: string }[]; release(): Promise<void> }>;
  /** What `box info` should show about this engine's view of the box (accelerator, sizes). */
  describe?(box: BoxHandle): Record<string, string>;
  /** Which per-box limits this host enforces for this engine, and why not where it does not. */
  limits?(): LimitReport[];
  /**
   * Engines with accelerators (QEMU): proves each one this host's platform
   * offers by booting, records the choice boxes then use, and returns it
   * with every probe. Slow (a boot per accelerator); not idempotent: it
   * probes again each time.
   */
  proveAccelerators?(): Promise<{ choice: { accel: string; reason: string }; probes: AcceleratorProbe[] }>;
}
