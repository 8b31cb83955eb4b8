// stormgate on Azure: a Linux function app running the Rust custom handler, its storage and monitoring, an Azure
// OpenAI account with one Standard deployment per tier (two different models, so two separate quota pools),
// Azure Managed Redis, Key Vault, and the managed identity that ties them together.
//
// Deploy into an existing resource group:
//   az deployment group create -g <rg> -f infra/main.bicep -p infra/main.dev.bicepparam

targetScope = 'resourceGroup'

@description('Short prefix for resource names (lowercase letters, digits, hyphens).')
@minLength(3)
@maxLength(12)
param namePrefix string = 'stormgate'

@description('Azure region for every resource; it must offer Flex Consumption (or Elastic Premium), Azure Managed Redis and Standard capacity for both models.')
param location string = resourceGroup().location

@description('Tags applied to every resource.')
param tags object = {}

// ---- Hosting -------------------------------------------------------------------------------------------------

@description('FC1 = Flex Consumption (default); EP1-EP3 = Elastic Premium.')
@allowed([
  'FC1'
  'EP1'
  'EP2'
  'EP3'
])
param hostingPlanSku string = 'FC1'

@description('Flex Consumption: most instances the app scales out to.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Flex Consumption: memory per instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Elastic Premium: instances kept always ready.')
@minValue(1)
param elasticMinimumInstances int = 1

@description('Elastic Premium: most instances the plan bursts to.')
@minValue(1)
@maxValue(100)
param elasticMaximumInstances int = 20

@description('Redundancy of the Functions host storage account.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
])
param storageSkuName string = 'Standard_LRS'

@description('Days of log retention in Log Analytics.')
@minValue(30)
@maxValue(730)
param logRetentionInDays int = 30

@description('RUST_LOG filter for the handler.')
param rustLog string = 'info'

@description('Key Vault purge protection; keep it on in production (it cannot be turned off again).')
param keyVaultPurgeProtection bool = true

// ---- Azure OpenAI ---------------------------------------------------------------------------------------------

@description('Turn off API-key access to Azure OpenAI; the app always uses its managed identity.')
param openAiDisableLocalAuth bool = true

@description('Azure OpenAI data-plane API version the handler calls.')
param openAiApiVersion string = '2024-10-21'

@description('Premium tier: deployment name.')
param premiumDeploymentName string = 'premium'

@description('Premium tier: model name.')
param premiumModelName string = 'gpt-4.1'

@description('Premium tier: model version.')
param premiumModelVersion string = '2025-04-14'

@description('Premium tier: Standard capacity in units of 1,000 tokens per minute. Sets both the deployment quota and the governor budget.')
@minValue(1)
param premiumCapacity int = 10

@description('Standard tier: deployment name.')
param standardDeploymentName string = 'standard'

@description('Standard tier: model name; must differ from the premium model so the tiers draw on separate quota.')
param standardModelName string = 'gpt-4.1-mini'

@description('Standard tier: model version.')
param standardModelVersion string = '2025-04-14'

@description('Standard tier: Standard capacity in units of 1,000 tokens per minute. Sets both the deployment quota and the governor budget.')
@minValue(1)
param standardCapacity int = 30

@description('Fraction of each deployment budget the governor keeps in reserve (429s arrive slightly before the limit).')
param governorHeadroom string = '0.10'

// ---- Redis ----------------------------------------------------------------------------------------------------

@description('managed = deploy Azure Managed Redis; existing = use the Redis whose URL is given in existingRedisUrl.')
@allowed([
  'managed'
  'existing'
])
param redisMode string = 'managed'

@description('Azure Managed Redis SKU.')
param redisSkuName string = 'Balanced_B0'

@description('Azure Managed Redis append-only-file persistence.')
param redisPersistenceEnabled bool = true

@description('Existing Redis only: url = credentials in the URL (or none); entra = the app identity signs in (grant it an access policy on that cache).')
@allowed([
  'url'
  'entra'
])
param existingRedisAuth string = 'entra'

@description('Existing Redis only: its rediss:// URL, with credentials in it if the cache uses them. Stored in Key Vault. Pass an empty string with redisMode=managed.')
@secure()
param existingRedisUrl string

// ---- Kafka ----------------------------------------------------------------------------------------------------

@description('Kafka bootstrap servers, host:port[,host:port].')
param kafkaBrokers string

@description('Topic carrying ServiceNow incident events.')
param kafkaTopic string

@description('Consumer group of the classify trigger.')
param kafkaConsumerGroup string = 'stormgate'

@description('SASL user name for Kafka.')
param kafkaUsername string

@description('SASL password for Kafka. Stored in Key Vault.')
@secure()
param kafkaPassword string

@description('Topic for customer notifications.')
param kafkaNotificationsTopic string

// ---- ServiceNow and search (optional) ---------------------------------------------------------------------------

@description('ServiceNow instance URL, e.g. https://example.service-now.com; empty turns work-note write-back off.')
param serviceNowInstanceUrl string = ''

@description('ServiceNow integration user name.')
param serviceNowUsername string = ''

@description('ServiceNow integration user password. Stored in Key Vault. Pass an empty string when write-back is off.')
@secure()
param serviceNowPassword string

@description('Azure AI Search endpoint; empty turns search enrichment off.')
param searchEndpoint string = ''

@description('Azure AI Search index name.')
param searchIndex string = ''

@description('Azure AI Search API key. Stored in Key Vault. Pass an empty string when search is off.')
@secure()
param searchApiKey string

// ---- Alerts (infra/modules/alerts.bicep; what each means: docs/operations.md, "Alerts") --------------------------

@description('Resource id of the action group the alerts notify; empty: they fire in the portal only.')
param alertActionGroupId string = ''

@description('Consumer lag, in seconds, above which the consumer-lag alert fires.')
@minValue(10)
param alertConsumerLagSeconds int = 120

@description('429s per minute on one deployment above which the throttling alert fires.')
@minValue(1)
param alertThrottlesPerMinute int = 10

@description('Dead letters per hour above which the dead-letter alert fires.')
@minValue(1)
param alertDeadLettersPerHour int = 10

@description('Redis memory use, in percent of maxmemory, above which the Redis alert fires.')
@minValue(10)
@maxValue(99)
param alertRedisMemoryPercent int = 80

@description('Failed invocations of one function in 15 minutes above which the failures alert fires.')
@minValue(1)
param alertFunctionFailures int = 5

// ---- Derived values -------------------------------------------------------------------------------------------

var token = take(uniqueString(subscription().id, resourceGroup().id, namePrefix), 8)
var compactPrefix = toLower(take(replace(namePrefix, '-', ''), 12))
var isFlexConsumption = hostingPlanSku == 'FC1'
var useManagedRedis = redisMode == 'managed'
var appName = 'func-${namePrefix}-${token}'
var contentShareName = isFlexConsumption ? '' : toLower(take(appName, 63))

// The single source of truth for both model deployments: the Azure OpenAI module deploys these, and the function
// app derives its deployment-name, model and tokens-per-minute settings from the very same object.
var modelDeployments = {
  premium: {
    name: premiumDeploymentName
    model: premiumModelName
    version: premiumModelVersion
    capacity: premiumCapacity
  }
  standard: {
    name: standardDeploymentName
    model: standardModelName
    version: standardModelVersion
    capacity: standardCapacity
  }
}

var allTags = union(tags, {
  application: 'stormgate'
})

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: allTags
    workspaceName: 'log-${namePrefix}-${token}'
    appInsightsName: 'appi-${namePrefix}-${token}'
    retentionInDays: logRetentionInDays
    disableLocalAuth: true
  }
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  params: {
    location: location
    tags: allTags
    appInsightsName: monitoring.outputs.appInsightsName
    actionGroupId: alertActionGroupId
    consumerLagSeconds: alertConsumerLagSeconds
    throttlesPerMinute: alertThrottlesPerMinute
    deadLettersPerHour: alertDeadLettersPerHour
    redisMemoryPercent: alertRedisMemoryPercent
    functionFailures: alertFunctionFailures
  }
}

module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  params: {
    location: location
    tags: allTags
    appInsightsName: monitoring.outputs.appInsightsName
  }
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  params: {
    location: location
    tags: allTags
    name: 'id-${namePrefix}-${token}'
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: allTags
    name: 'st${compactPrefix}${token}'
    skuName: storageSkuName
    deploymentContainerName: 'app-package'
    workQueueNames: [
      'summarize-premium'
      'summarize-standard'
    ]
    contentShareName: contentShareName
  }
}

module openAi 'modules/openai.bicep' = {
  name: 'openai'
  params: {
    location: location
    tags: allTags
    name: 'oai-${namePrefix}-${token}'
    disableLocalAuth: openAiDisableLocalAuth
    deployments: modelDeployments
  }
}

module redis 'modules/redis.bicep' = if (useManagedRedis) {
  name: 'redis'
  params: {
    location: location
    tags: allTags
    name: 'redis-${namePrefix}-${token}'
    skuName: redisSkuName
    persistenceEnabled: redisPersistenceEnabled
    appPrincipalId: identity.outputs.principalId
  }
}

module keyVault 'modules/keyvault.bicep' = {
  name: 'keyvault'
  params: {
    location: location
    tags: allTags
    name: 'kv-${compactPrefix}-${token}'
    enablePurgeProtection: keyVaultPurgeProtection
    kafkaPassword: kafkaPassword
    serviceNowPassword: serviceNowPassword
    searchApiKey: searchApiKey
    existingRedisUrl: useManagedRedis ? '' : existingRedisUrl
    contentStorageAccountName: isFlexConsumption ? '' : storage.outputs.name
  }
}

module access 'modules/access.bicep' = {
  name: 'access'
  params: {
    principalId: identity.outputs.principalId
    openAiAccountName: openAi.outputs.name
    keyVaultName: keyVault.outputs.name
    storageAccountName: storage.outputs.name
    appInsightsName: monitoring.outputs.appInsightsName
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  // Key Vault references and identity-based storage resolve only once the roles exist.
  dependsOn: [
    access
  ]
  params: {
    location: location
    tags: allTags
    planName: 'plan-${namePrefix}-${token}'
    appName: appName
    planSku: hostingPlanSku
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    elasticMinimumInstances: elasticMinimumInstances
    elasticMaximumInstances: elasticMaximumInstances
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    identityPrincipalId: identity.outputs.principalId
    storageAccountName: storage.outputs.name
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    contentShareName: contentShareName
    appInsightsConnectionString: monitoring.outputs.appInsightsConnectionString
    openAiEndpoint: openAi.outputs.endpoint
    openAiApiVersion: openAiApiVersion
    modelDeployments: modelDeployments
    governorHeadroom: governorHeadroom
    managedRedisUrl: useManagedRedis ? redis.outputs.url : ''
    existingRedisAuth: existingRedisAuth
    keyVaultUri: keyVault.outputs.uri
    vaultReferences: {
      kafkaPassword: keyVault.outputs.kafkaPasswordRef
      serviceNowPassword: keyVault.outputs.serviceNowPasswordRef
      searchApiKey: keyVault.outputs.searchApiKeyRef
      existingRedisUrl: keyVault.outputs.existingRedisUrlRef
      contentShareConnection: keyVault.outputs.contentShareConnectionRef
    }
    kafkaBrokers: kafkaBrokers
    kafkaTopic: kafkaTopic
    kafkaConsumerGroup: kafkaConsumerGroup
    kafkaUsername: kafkaUsername
    kafkaNotificationsTopic: kafkaNotificationsTopic
    serviceNowInstanceUrl: serviceNowInstanceUrl
    serviceNowUsername: serviceNowUsername
    searchEndpoint: searchEndpoint
    searchIndex: searchIndex
    rustLog: rustLog
  }
}

output resourceGroupName string = resourceGroup().name
output functionAppName string = functionApp.outputs.name
output functionAppHostName string = functionApp.outputs.defaultHostName
output hostingPlanSku string = hostingPlanSku
output identityClientId string = identity.outputs.clientId
output identityPrincipalId string = identity.outputs.principalId
output storageAccountName string = storage.outputs.name
output keyVaultName string = keyVault.outputs.name
output appInsightsName string = monitoring.outputs.appInsightsName
output alertRuleNames array = alerts.outputs.alertRuleNames
output workbookId string = workbook.outputs.workbookId
output openAiAccountName string = openAi.outputs.name
output openAiEndpoint string = openAi.outputs.endpoint
output premiumDeploymentName string = premiumDeploymentName
output premiumTokensPerMinute int = premiumCapacity * 1000
output standardDeploymentName string = standardDeploymentName
output standardTokensPerMinute int = standardCapacity * 1000
output redisHostName string = useManagedRedis ? redis.outputs.hostName : ''
