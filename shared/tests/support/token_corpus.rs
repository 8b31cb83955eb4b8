//! A varied text corpus for measuring token estimates: network alarm logs (IPs,
//! timestamps, interface names, MACs, hex ids), incident prose, ticket JSON, non-ASCII
//! text in several scripts, and machine noise (base64, hex dumps, IPv6, CSV). Generated
//! deterministically from a seed, so measurements are reproducible.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// One corpus sample: what it is, and its text.
pub struct Sample {
    pub kind: &'static str,
    pub text: String,
}

const HOSTS: &[&str] = &[
    "nyc-core-rtr01",
    "bos-agg-sw17",
    "chi-olt-07",
    "den-pe-02.net.example.com",
    "sea-dwdm-3",
    "atl-bng-11",
    "dfw-cmts-4",
    "phx-edge-fw2",
];
const INTERFACES: &[&str] = &[
    "GigabitEthernet0/0/1",
    "TenGigE0/1/0/3",
    "xe-2/0/7",
    "ae12.3001",
    "HundredGigE0/0/0/1",
    "Bundle-Ether40",
    "et-0/0/2:1",
    "pon 1/1/3",
];
const ALARMS: &[&str] = &[
    "%LINK-3-UPDOWN: Interface {if}, changed state to down",
    "%LINK-3-UPDOWN: Interface {if}, changed state to up",
    "LOS (loss of signal) alarm raised on {if}, Rx power -40.00 dBm",
    "ONT {n} dying gasp received on {if}",
    "BGP neighbor {ip} (AS {asn}) state changed Established -> Idle (hold timer expired)",
    "OSPF adjacency with {ip} on {if} changed from FULL to DOWN, Dead timer expired",
    "PSU{d} failure on chassis {d} slot {d}, input voltage 0.0V, running on battery",
    "Power: commercial AC lost, site on battery, estimated runtime {n} min",
    "MAC {mac} flapping between {if} and {if2}",
    "CRC errors {n} on {if} in last 300s, threshold 100",
    "Optical Rx power low on {if}: -28.43 dBm (threshold -27.00 dBm)",
    "Fan tray {d} removed; temperature sensor {d} at {n}C",
];
const PROSE: &[&str] = &[
    "Field technicians were dispatched to the hub site after several customers in the area reported a complete loss of service.",
    "The outage appears to be caused by a fibre cut on the northern ring between the two aggregation nodes, which also isolated the backup path.",
    "Power was restored at 14:05 by the utility, but three remote terminals remained on battery and two of them went dark before generators arrived.",
    "Customers on the affected exchanges may experience intermittent connectivity while traffic is rerouted; no action is needed on their side.",
    "Next step: splice crew en route with an ETA of ninety minutes, and the NOC will monitor the BGP sessions once the span is back in service.",
    "We have opened a case with the vendor regarding the line card resets, which started after last night's maintenance window.",
];
const NON_ASCII: &[&str] = &[
    "Störung im Glasfasernetz: Kunden in München und Köln sind betroffen; Techniker sind unterwegs.",
    "Panne de courant sur le site de Lyon-Part-Dieu : les équipements fonctionnent sur batterie, intervention prévue à 15 h.",
    "Interrupción del servicio en la región de Andalucía; se está trabajando para restablecerlo lo antes posible.",
    "大阪データセンターで電源障害が発生しました。復旧作業を実施中です。",
    "上海机房光纤中断，影响约两千名用户，抢修人员已到达现场。",
    "Авария на магистральном канале Москва — Санкт-Петербург, абоненты без связи.",
    "انقطاع الخدمة في منطقة الرياض بسبب عطل في الألياف البصرية",
    "서울 지역 네트워크 장애가 발생하여 복구 중입니다.",
    "Site down ⚡🔋📉 — customers affected: ~1 200 ✅ restored 🎉",
    "Ελληνικά: διακοπή ρεύματος στον σταθμό βάσης, οι μπαταρίες εξαντλούνται.",
];

fn pick<'a>(rng: &mut SmallRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

fn ip(rng: &mut SmallRng) -> String {
    format!(
        "10.{}.{}.{}",
        rng.random_range(0..256),
        rng.random_range(0..256),
        rng.random_range(1..255)
    )
}

fn mac(rng: &mut SmallRng) -> String {
    (0..6)
        .map(|_| format!("{:02x}", rng.random_range(0..256u32)))
        .collect::<Vec<_>>()
        .join(":")
}

fn timestamp(rng: &mut SmallRng) -> String {
    format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        rng.random_range(1..29),
        rng.random_range(0..24),
        rng.random_range(0..60),
        rng.random_range(0..60),
        rng.random_range(0..1000)
    )
}

fn hex(rng: &mut SmallRng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect()
}

fn alarm_line(rng: &mut SmallRng) -> String {
    let body = pick(rng, ALARMS)
        .replace("{if2}", pick(rng, INTERFACES))
        .replace("{if}", pick(rng, INTERFACES))
        .replace("{ip}", &ip(rng))
        .replace("{asn}", &rng.random_range(64_512..65_535).to_string())
        .replace("{mac}", &mac(rng))
        .replace("{n}", &rng.random_range(1..5_000).to_string())
        .replace("{d}", &rng.random_range(0..9).to_string());
    format!(
        "{} {} {} seq={} {}",
        timestamp(rng),
        pick(rng, HOSTS),
        hex(rng, 8),
        rng.random_range(0..1_000_000),
        body
    )
}

fn alarm_log(rng: &mut SmallRng, lines: usize) -> String {
    let mut out = String::new();
    for _ in 0..lines {
        let line = alarm_line(rng);
        // Storm logs repeat: some lines come several times in a row.
        for _ in 0..rng.random_range(1..4) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

fn prose(rng: &mut SmallRng, sentences: usize) -> String {
    (0..sentences)
        .map(|_| pick(rng, PROSE))
        .collect::<Vec<_>>()
        .join(" ")
}

fn ticket_json(rng: &mut SmallRng, pretty: bool) -> String {
    let value = serde_json::json!({
        "sys_id": hex(rng, 32),
        "number": format!("INC{:07}", rng.random_range(0..9_999_999)),
        "priority": rng.random_range(1..6).to_string(),
        "impact": "2", "urgency": "1", "state": "2",
        "category": "network", "subcategory": "fibre",
        "cmdb_ci": {"link": format!("https://instance.service-now.com/api/now/table/cmdb_ci/{}", hex(rng, 32)), "value": hex(rng, 32)},
        "location": pick(rng, HOSTS),
        "short_description": prose(rng, 1),
        "description": prose(rng, 3),
        "work_notes": alarm_log(rng, 4),
        "sys_mod_count": rng.random_range(0..40).to_string(),
        "sys_updated_on": "2026-11-29 21:16:56",
    });
    if pretty {
        serde_json::to_string_pretty(&value).unwrap_or_default()
    } else {
        value.to_string()
    }
}

fn non_ascii(rng: &mut SmallRng, sentences: usize) -> String {
    (0..sentences)
        .map(|_| pick(rng, NON_ASCII))
        .collect::<Vec<_>>()
        .join("\n")
}

fn base64_blob(rng: &mut SmallRng, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..64)]))
        .collect()
}

fn machine_noise(rng: &mut SmallRng, lines: usize) -> String {
    let mut out = String::new();
    for i in 0..lines {
        let line = match i % 5 {
            0 => format!("payload={}", base64_blob(rng, 76)),
            1 => (0..16).map(|_| hex(rng, 2)).collect::<Vec<_>>().join(" "),
            2 => format!(
                "2001:db8:{}:{}::{}/64 via fe80::{}:{}",
                hex(rng, 4),
                hex(rng, 4),
                hex(rng, 2),
                hex(rng, 4),
                hex(rng, 4)
            ),
            3 => format!(
                "{},{},{},{:.3},{}",
                rng.random_range(0..99_999),
                ip(rng),
                rng.random_range(0..9_999),
                rng.random_range(0.0..100.0),
                timestamp(rng)
            ),
            _ => format!(
                "{}.{}.{}.{} -> {}",
                rng.random_range(0..9),
                rng.random_range(0..9),
                rng.random_range(0..9),
                rng.random_range(0..9),
                mac(rng)
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The corpus: every kind at sizes from one line to tens of kilobytes.
pub fn corpus(seed: u64) -> Vec<Sample> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for &size in &[1usize, 3, 10, 40, 150, 400] {
        out.push(Sample {
            kind: "alarm_log",
            text: alarm_log(&mut rng, size),
        });
        out.push(Sample {
            kind: "prose",
            text: prose(&mut rng, size),
        });
        out.push(Sample {
            kind: "json_compact",
            text: (0..size.div_ceil(4))
                .map(|_| ticket_json(&mut rng, false))
                .collect(),
        });
        out.push(Sample {
            kind: "json_pretty",
            text: (0..size.div_ceil(4))
                .map(|_| ticket_json(&mut rng, true))
                .collect(),
        });
        out.push(Sample {
            kind: "non_ascii",
            text: non_ascii(&mut rng, size),
        });
        out.push(Sample {
            kind: "machine_noise",
            text: machine_noise(&mut rng, size),
        });
        let mixed = format!(
            "{}\n{}\n{}\n{}",
            prose(&mut rng, size),
            alarm_log(&mut rng, size),
            non_ascii(&mut rng, size.div_ceil(3)),
            machine_noise(&mut rng, size.div_ceil(3))
        );
        out.push(Sample {
            kind: "mixed",
            text: mixed,
        });
    }
    out
}
