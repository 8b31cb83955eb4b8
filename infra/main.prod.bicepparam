// Production deployment sized for a network storm: Flex Consumption with room to scale out and a warm classify
// instance, private networking (private endpoints, public access off), zone-redundant storage, a persistent Azure
// Managed Redis with headroom, and Data Zone capacity for bursts of summaries.
// Secrets come from the deploying shell's environment (or the pipeline's secret store), never from this file:
//   export KAFKA_PASSWORD=...  SERVICENOW_PASSWORD=...  [SEARCH_API_KEY=...]  [EXISTING_REDIS_URL=...]
using 'main.bicep'

param namePrefix = 'stormgate'
param tags = {
  environment: 'prod'
}

param maximumInstanceCount = 200
param instanceMemoryMB = 2048
param classifyAlwaysReady = 1
param storageSkuName = 'Standard_ZRS'
param logRetentionInDays = 90
param keyVaultPurgeProtection = true
param rustLog = 'info'

// The data services are reached through private endpoints only; deploy the app package from inside the network
// or a pipeline agent that can reach the storage account (docs/deploy.md, "Private networking").
param privateNetworking = true
param vnetAddressPrefix = '10.40.0.0/16'

// Capacity is in units of 1,000 tokens per minute: 150 = 150,000 TPM, and 150 requests per minute for the gpt-4.1
// family (1 per unit; gpt-4o would get 6). Request the quota for these in the region first; the governor gets
// exactly this budget. Data Zone Standard keeps processing in the data zone (docs/deploy.md). The prices are the
// Global list prices; Data Zone is priced higher: set the figures of your agreement, they drive the cost gauges.
param modelDeployments = {
  premium: {
    name: 'premium'
    model: 'gpt-4.1'
    version: '2025-04-14'
    sku: 'DataZoneStandard'
    capacity: 150
    rpmPerUnit: 1
    priceInputPer1M: '2.00'
    priceOutputPer1M: '8.00'
  }
  standard: {
    name: 'standard'
    model: 'gpt-4.1-mini'
    version: '2025-04-14'
    sku: 'DataZoneStandard'
    capacity: 450
    rpmPerUnit: 1
    priceInputPer1M: '0.40'
    priceOutputPer1M: '1.60'
  }
}
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
