// Small development deployment: Flex Consumption, public endpoints, the smallest Azure Managed Redis, a few
// thousand tokens per minute per tier on Global Standard. Secrets come from the deploying shell's environment, never from this file:
//   export KAFKA_PASSWORD=...            (required)
//   export SERVICENOW_PASSWORD=...       (optional; empty turns write-back off)
//   export SEARCH_API_KEY=...            (optional)
//   export EXISTING_REDIS_URL=...        (only with redisMode = 'existing')
using 'main.bicep'

param namePrefix = 'sgdev'
param tags = {
  environment: 'dev'
}

param maximumInstanceCount = 40
param instanceMemoryMB = 2048
param storageSkuName = 'Standard_LRS'
param logRetentionInDays = 30
param keyVaultPurgeProtection = false
param rustLog = 'info,stormgate=debug'

param privateNetworking = false

// Capacity is in units of 1,000 tokens per minute: 10 = 10,000 TPM, and for the gpt-4.1 family 10 requests per
// minute (1 per unit). The governor gets exactly this budget. Global Standard: the most regions and quota.
param modelDeployments = {
  premium: {
    name: 'premium'
    model: 'gpt-4.1'
    version: '2025-04-14'
    sku: 'GlobalStandard'
    capacity: 10
    rpmPerUnit: 1
    priceInputPer1M: '2.00'
    priceOutputPer1M: '8.00'
  }
  standard: {
    name: 'standard'
    model: 'gpt-4.1-mini'
    version: '2025-04-14'
    sku: 'GlobalStandard'
    capacity: 30
    rpmPerUnit: 1
    priceInputPer1M: '0.40'
    priceOutputPer1M: '1.60'
  }
}

param redisMode = 'managed'
param redisSkuName = 'Balanced_B0'
param redisPersistenceEnabled = false
param existingRedisUrl = readEnvironmentVariable('EXISTING_REDIS_URL', '')

param kafkaBrokers = 'kafka-dev.example.net:9093'
param kafkaTopic = 'servicenow.incident.events'
param kafkaConsumerGroup = 'stormgate-dev'
param kafkaUsername = 'stormgate-dev'
param kafkaPassword = readEnvironmentVariable('KAFKA_PASSWORD')
param kafkaNotificationsTopic = 'stormgate.notifications'

param serviceNowInstanceUrl = ''
param serviceNowUsername = ''
param serviceNowPassword = readEnvironmentVariable('SERVICENOW_PASSWORD', '')

param searchEndpoint = ''
param searchIndex = ''
param searchApiKey = readEnvironmentVariable('SEARCH_API_KEY', '')
