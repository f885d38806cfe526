/**
 * WS-Discovery (the SOAP-over-UDP protocol Windows uses to find SMB hosts):
 * a Probe for devices sent to the multicast group, and the ProbeMatches that
 * come back by unicast. Pure builder and parser (no XML library: the fields
 * needed are plain elements).
 */
import crypto from 'node:crypto';

export const WSD_GROUP = '239.255.255.250';
export const WSD_PORT = 3702;

export function probe(messageId = `urn:uuid:${crypto.randomUUID()}`): Buffer {
  return Buffer.from(
    '<?xml version="1.0" encoding="utf-8"?>' +
      '<soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing" ' +
      'xmlns:wsd="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:wsdp="http://schemas.xmlsoap.org/ws/2006/02/devprof">' +
      '<soap:Header><wsa:To>urn:schemas-xmlsoap-org:ws:2005:04:discovery</wsa:To>' +
      '<wsa:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe</wsa:Action>' +
      `<wsa:MessageID>${messageId}</wsa:MessageID></soap:Header>` +
      '<soap:Body><wsd:Probe><wsd:Types>wsdp:Device</wsd:Types></wsd:Probe></soap:Body></soap:Envelope>',
  );
}

export interface ProbeMatch {
  endpoint: string | null;
  types: string[];
  xaddrs: string[];
  relatesTo: string | null;
}

const text = (xml: string, local: string): string[] => {
  const re = new RegExp(`<(?:[A-Za-z0-9_-]+:)?${local}\\b[^>]*>([\\s\\S]*?)</(?:[A-Za-z0-9_-]+:)?${local}>`, 'g');
  const out: string[] = [];
  for (let m = re.exec(xml); m; m = re.exec(xml)) out.push(m[1].trim());
  return out;
};

/** The matches of a ProbeMatches message, or [] when it is something else. */
export function parseProbeMatches(xml: string): ProbeMatch[] {
  if (!/ProbeMatches/.test(xml)) return [];
  const relatesTo = text(xml, 'RelatesTo')[0] ?? null;
  return text(xml, 'ProbeMatch').map((m) => ({
    endpoint: text(m, 'Address')[0] ?? null,
    types: (text(m, 'Types')[0] ?? '').split(/\s+/).filter(Boolean),
    xaddrs: (text(m, 'XAddrs')[0] ?? '').split(/\s+/).filter(Boolean),
    relatesTo,
  }));
}
