// `--cluster`'s value, read where the verbs parse flags (no NATS client loaded for it).
import { HutchError } from "@hutch/shared/base";

/** `--cluster nats://HOST:PORT[,...]` as a list of URLs, checked. */
export function parseClusterUrls(s: string): string[] {
  const urls = s
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
  const bad = urls.find((u) => !/^(nats|tls):\/\/[^\s/,]+:\d{1,5}$/.test(u));
  if (urls.length === 0 || bad !== undefined)
    throw new HutchError(
      "invalid",
      `--cluster ${s}: expected nats://HOST:PORT, comma-separated`,
      "e.g. --cluster nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222",
    );
  return urls;
}
