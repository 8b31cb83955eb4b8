// Production deployment sized for a network storm: Flex Consumption with room to scale out, zone-redundant
// storage, a persistent Azure Managed Redis with headroom, and deployment capacity for bursts of summaries.
// Secrets come from the deploying shell's environment (or the pipeline's secret store), never from this file:
//   export KAFKA_PASSWORD=...  SERVICENOW_PASSWORD=...  [SEARCH_API_KEY=...]  [EXISTING_REDIS_URL=...]
using 'main.bicep'

param namePrefix = 'stormgate'
param tags = {
  environment: 'prod'
}

// Switch to 'EP1' (or larger) to run on Elastic Premium instead; runtime scale monitoring is turned on there.
param hostingPlanSku = 'FC1'
param maximumInstanceCount = 200
param instanceMemoryMB = 2048
param elasticMinimumInstances = 2
param elasticMaximumInstances = 30
param storageSkuName = 'Standard_ZRS'
param logRetentionInDays = 90
param keyVaultPurgeProtection = true
param rustLog = 'info'

// Capacity is in units of 1,000 tokens per minute: 150 = 150,000 TPM (900 requests per minute). Request quota
// for these in the region first; the governor gets exactly this budget.
param premiumDeploymentName = 'premium'
param premiumModelName = 'gpt-4.1'
param premiumModelVersion = '2025-04-14'
param premiumCapacity = 150
param standardDeploymentName = 'standard'
param standardModelName = 'gpt-4.1-mini'
param standardModelVersion = '2025-04-14'
param standardCapacity = 450
param governorHeadroom = '0.10'

param redisMode = 'managed'
param redisSkuName = 'Balanced_B5'
param redisPersistenceEnabled = true
param existingRedisUrl = readEnvironmentVariable('EXISTING_REDIS_URL', '')

param kafkaBrokers = 'kafka.example.net:9093'
param kafkaTopic = 'servicenow.incident.events'
param kafkaConsumerGroup = 'stormgate'
param kafkaUsername = 'stormgate'
param kafkaPassword = readEnvironmentVariable('KAFKA_PASSWORD')
param kafkaNotificationsTopic = 'stormgate.notifications'

param serviceNowInstanceUrl = 'https://example.service-now.com'
param serviceNowUsername = 'stormgate.integration'
param serviceNowPassword = readEnvironmentVariable('SERVICENOW_PASSWORD')

param searchEndpoint = ''
param searchIndex = ''
param searchApiKey = readEnvironmentVariable('SEARCH_API_KEY', '')
