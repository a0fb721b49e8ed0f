// The daemon's services and how they are wired to each other, in one place
// for the daemon and for in-process tests.
import type { Database } from "bun:sqlite";
import { join } from "node:path";
import { BoxStore } from "../store/boxes.ts";
import { SessionStore } from "../store/sessions.ts";
import { BrokerStore } from "../store/broker.ts";
import { BoxService } from "../box/service.ts";
import { SessionService } from "../session/service.ts";
import { Recorder } from "../session/recorder.ts";
import { BrokerService } from "../broker/service.ts";
import { Sealer } from "../broker/seal.ts";
import type { Engine } from "../engine/types.ts";
import { HOME_FILES } from "../paths.ts";
import { wireAgents } from "../harness/wire.ts";
import { brokerLink } from "../harness/broker-link.ts";

export interface Services {
  boxes: BoxService;
  sessions: SessionService;
  sessionStore: SessionStore;
  broker: BrokerService;
  recorder: Recorder;
}

export async function createServices(home: string, db: Database, engines: Record<string, Engine>): Promise<Services> {
  const boxes = new BoxService(new BoxStore(db), engines, home);
  const broker = new BrokerService(new BrokerStore(db), Sealer.load(join(home, HOME_FILES.secretsKey)), join(home, HOME_FILES.config));
  const sessionStore = new SessionStore(db);
  const sessions = new SessionService(sessionStore, boxes);
  const recorder = new Recorder(sessionStore, sessions, boxes);
  sessions.attachRecorder(recorder);
  wireAgents({ sessions, recorder, boxes, home, link: brokerLink(broker, (id) => boxes.byId(id)?.name ?? id) });
  boxes.checkPolicy = (p) => broker.checkPolicy(p);
  boxes.onChannel = (boxId, dir, channel) => broker.attach(boxId, dir, channel);
  boxes.onChannelGone = (boxId) => broker.detach(boxId);
  boxes.onStateChange = (boxId, state, reason) => sessions.boxChanged(boxId, state, reason);
  broker.onDecision = (boxId, decision, facts) => sessions.boxEvent(boxId, `egress.${decision}`, { box: boxId, ...facts });
  return { boxes, sessions, sessionStore, broker, recorder };
}
