//! `stormgate soak`: the retention soak ([`stormgate_lab::soak`]) against a Redis
//! of the operator's, on a virtual clock: how much memory Redis needs for a given intake
//! and retention. The Redis must be empty and nobody else's: `used_memory` is the
//! server's, and the soak's keys (namespace `soak`) are left for inspection.

use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use stormgate_lab::soak::{RedisMemory, SoakConfig, StormWeek, run};
use stormgate_shared::store::StoreLimits;
use stormgate_shared::store::redis::RedisStore;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// An empty Redis to fill, e.g. `redis-server --port 6390 --save ''` started for it.
    #[arg(long, value_name = "URL")]
    pub redis: String,
    #[arg(long, default_value_t = 60)]
    pub days: u32,
    #[arg(long, default_value_t = 3_000)]
    pub tickets_per_day: u32,
    /// Days a ticket is kept after its last update (the handler's STORMGATE_RETENTION_DAYS).
    #[arg(long, default_value_t = 14)]
    pub retention_days: u32,
    /// The storm's first day (0-based); no storm when the factor is 1.
    #[arg(long, default_value_t = 21)]
    pub storm_first_day: u32,
    #[arg(long, default_value_t = 7)]
    pub storm_days: u32,
    /// How many times the usual intake arrives each storm day.
    #[arg(long, default_value_t = 6)]
    pub storm_factor: u32,
    #[arg(long, default_value_t = 9)]
    pub seed: u64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub async fn run_soak(args: SoakArgs) -> anyhow::Result<()> {
    let client = redis::Client::open(args.redis.as_str()).context("--redis")?;
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .context("connecting to --redis")?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut connection).await?;
    anyhow::ensure!(
        keys == 0,
        "--redis holds {keys} keys: the soak measures the whole server's memory, give it an empty one"
    );
    let retention = Duration::from_secs(u64::from(args.retention_days) * 24 * 3600);
    let config = SoakConfig {
        days: args.days,
        tickets_per_day: args.tickets_per_day,
        storm: (args.storm_factor > 1).then_some(StormWeek {
            first_day: args.storm_first_day,
            days: args.storm_days,
            factor: args.storm_factor,
        }),
        retention,
        seed: args.seed,
    };
    let store = RedisStore::new(client.clone(), "soak".parse()?).with_limits(StoreLimits {
        retention,
        ..StoreLimits::default()
    });
    let report = run(&store, &RedisMemory(client), &config).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}
